package consumer_test

import (
	"errors"
	"fmt"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
)

func TestResolve_F1_ClientSuccessIsTheZeroResult(t *testing.T) {
	// The premise of F1: a forgotten result is an acknowledgement in the client.
	var zero rmq.ConsumeResult
	assert.Equal(t, rmq.ConsumeSuccess, zero)
}

func TestResolve_F1_ZeroOutcomeIsNeverSuccess(t *testing.T) {
	var zero consumer.Outcome
	assert.Equal(t, consumer.KindUnset, zero.Kind)
	for _, mode := range []bool{consumer.Concurrent, consumer.Orderly} {
		res := consumer.Resolve(zero, nil, mode)
		assert.NotEqual(t, rmq.ConsumeSuccess, res.Result, "orderly %v", mode)
	}
	assert.Equal(t, consumer.Resolution{Result: rmq.ConsumeRetryLater}, consumer.Resolve(zero, nil, consumer.Concurrent))
	assert.Equal(t, consumer.Resolution{Result: rmq.SuspendCurrentQueueAMoment}, consumer.Resolve(zero, nil, consumer.Orderly))
}

func TestResolve_EveryKindConcurrent(t *testing.T) {
	for _, tc := range []struct {
		o    consumer.Outcome
		want consumer.Resolution
	}{
		{consumer.Outcome{}, consumer.Resolution{Result: rmq.ConsumeRetryLater}},
		{consumer.Processed(), consumer.Resolution{Result: rmq.ConsumeSuccess}},
		{consumer.Duplicate(), consumer.Resolution{Result: rmq.ConsumeSuccess}},
		{consumer.Stale("v5 < v7"), consumer.Resolution{Result: rmq.ConsumeSuccess}},
		{consumer.Retry(0, "later"), consumer.Resolution{Result: rmq.ConsumeRetryLater}},
		{consumer.Retry(3, "later"), consumer.Resolution{Result: rmq.ConsumeRetryLater, DelayLevel: 3}},
		{consumer.DeadLetter("poison"), consumer.Resolution{Result: rmq.ConsumeRetryLater, DelayLevel: -1}},
		{consumer.Outcome{Kind: consumer.KindDeadLettered, Reason: "published"}, consumer.Resolution{Result: rmq.ConsumeSuccess}},
		{consumer.Outcome{Kind: consumer.Kind(200)}, consumer.Resolution{Result: rmq.ConsumeRetryLater}},
	} {
		t.Run(fmt.Sprint(tc.o.Kind, " ", tc.o.Reason), func(t *testing.T) {
			assert.Equal(t, tc.want, consumer.Resolve(tc.o, nil, consumer.Concurrent))
		})
	}
}

func TestResolve_F3_EveryKindOrderly(t *testing.T) {
	for _, tc := range []struct {
		o    consumer.Outcome
		want rmq.ConsumeResult
	}{
		{consumer.Outcome{}, rmq.SuspendCurrentQueueAMoment},
		{consumer.Processed(), rmq.ConsumeSuccess},
		{consumer.Duplicate(), rmq.ConsumeSuccess},
		{consumer.Stale("v5 < v7"), rmq.ConsumeSuccess},
		{consumer.Retry(0, "later"), rmq.SuspendCurrentQueueAMoment},
		{consumer.Retry(3, "later"), rmq.SuspendCurrentQueueAMoment},
		{consumer.DeadLetter("poison"), rmq.SuspendCurrentQueueAMoment},
		{consumer.Outcome{Kind: consumer.KindDeadLettered}, rmq.ConsumeSuccess},
	} {
		t.Run(fmt.Sprint(tc.o.Kind, " ", tc.o.Reason), func(t *testing.T) {
			res := consumer.Resolve(tc.o, nil, consumer.Orderly)
			assert.Equal(t, tc.want, res.Result)
			assert.NotEqual(t, rmq.ConsumeRetryLater, res.Result, "the orderly path does not handle RetryLater")
		})
	}
}

func TestResolve_F3_OrderlyFailureSuspendsTheQueue(t *testing.T) {
	res := consumer.Resolve(consumer.Processed(), errors.New("db down"), consumer.Orderly)
	assert.Equal(t, rmq.SuspendCurrentQueueAMoment, res.Result)
}

func TestResolve_F1_ErrorNeverAcks(t *testing.T) {
	err := errors.New("db down")
	for _, o := range []consumer.Outcome{
		{}, consumer.Processed(), consumer.Duplicate(), consumer.Stale("old"),
		{Kind: consumer.KindDeadLettered}, consumer.Retry(0, "x"),
	} {
		t.Run(fmt.Sprint(o.Kind, " ", o.Reason), func(t *testing.T) {
			assert.Equal(t, consumer.Resolution{Result: rmq.ConsumeRetryLater}, consumer.Resolve(o, err, consumer.Concurrent),
				"an error with a success kind is a plain retry, never an ack and never a DLQ")
		})
	}
}

func TestResolve_ErrorKeepsRetryDelayAndDeadLetter(t *testing.T) {
	err := errors.New("x")
	assert.Equal(t, consumer.Resolution{Result: rmq.ConsumeRetryLater, DelayLevel: 3}, consumer.Resolve(consumer.Retry(3, "x"), err, consumer.Concurrent))
	assert.Equal(t, consumer.Resolution{Result: rmq.ConsumeRetryLater, DelayLevel: consumer.DelayLevelDLQ}, consumer.Resolve(consumer.DeadLetter("x"), err, consumer.Concurrent))
}

func TestResolve_DeadLetterUsesDelayLevelMinusOne(t *testing.T) {
	assert.Equal(t, -1, consumer.DelayLevelDLQ)
	res := consumer.Resolve(consumer.DeadLetter("invalid payload"), nil, consumer.Concurrent)
	assert.Equal(t, rmq.ConsumeRetryLater, res.Result)
	assert.Equal(t, -1, res.DelayLevel)
}

func TestKind_StringAndAcknowledges(t *testing.T) {
	for _, tc := range []struct {
		k     consumer.Kind
		label string
		acks  bool
	}{
		{consumer.KindUnset, "unset", false},
		{consumer.KindProcessed, "processed", true},
		{consumer.KindDuplicate, "duplicate", true},
		{consumer.KindStale, "stale", true},
		{consumer.KindRetry, "retry", false},
		{consumer.KindDeadLetter, "dead_letter", false},
		{consumer.KindDeadLettered, "dead_lettered", true},
	} {
		assert.Equal(t, tc.label, tc.k.String())
		assert.Equal(t, tc.acks, tc.k.Acknowledges(), tc.label)
	}
}

func TestOutcome_ConstructorsSetKindDelayAndReason(t *testing.T) {
	assert.Equal(t, consumer.Outcome{Kind: consumer.KindRetry, DelayLevel: 5, Reason: "busy"}, consumer.Retry(5, "busy"))
	assert.Equal(t, consumer.Outcome{Kind: consumer.KindDeadLetter, Reason: "poison"}, consumer.DeadLetter("poison"))
	assert.Equal(t, consumer.Outcome{Kind: consumer.KindProcessed}, consumer.Processed())
}

func TestResolve_NegativeRetryDelayNeverDeadLetters(t *testing.T) {
	// Only KindDeadLetter may produce DelayLevelDLQ; a retry with a bogus negative level lets the broker choose.
	res := consumer.Resolve(consumer.Retry(-1, "oops"), nil, consumer.Concurrent)
	assert.Equal(t, consumer.Resolution{Result: rmq.ConsumeRetryLater}, res)
}
