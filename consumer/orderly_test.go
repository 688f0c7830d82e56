package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/letter"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// orderlyAnswer is what the client's orderly path is told about one callback, and what it then does.
type orderlyAnswer struct {
	res       rmq.ConsumeResult
	err       error
	suspendMs int  // the orderly context's SuspendCurrentQueueTimeMillis after the callback (-1: untouched)
	sentBack  bool // the client would have sent a message to its DLQ itself (ReconsumeTimes > max)
}

// deliverOrderly invokes topic's callback as the client's consumeMessageOrderly does: with a fresh
// ConsumeOrderlyContext (SuspendCurrentQueueTimeMillis -1) and, on SuspendCurrentQueueAMoment, the
// client's checkReconsumeTimes on the same messages: a message whose ReconsumeTimes exceeds maxAttempts
// would be sent to the broker's DLQ without a reason (sentBack), any other has ReconsumeTimes raised by
// one, in memory, for its next delivery.
func deliverOrderly(fp *fakePush, topic string, maxAttempts int32, msgs ...*primitive.MessageExt) orderlyAnswer {
	fp.mu.Lock()
	cb := fp.callbacks[topic]
	fp.mu.Unlock()
	oc := primitive.NewConsumeOrderlyContext()
	res, err := cb(primitive.WithOrderlyCtx(context.Background(), oc), msgs...)
	a := orderlyAnswer{res: res, err: err, suspendMs: oc.SuspendCurrentQueueTimeMillis}
	if res == rmq.SuspendCurrentQueueAMoment {
		for _, m := range msgs {
			if m.ReconsumeTimes > maxAttempts {
				a.sentBack = true
				continue
			}
			m.ReconsumeTimes++
		}
	}
	return a
}

// orderlyConfig is validConfig in orderly mode with MaxAttempts 2 and a 250 ms suspension.
func orderlyConfig() consumer.Config {
	cfg := validConfig()
	cfg.Orderly = true
	cfg.MaxAttempts = 2
	cfg.SuspendTime = 250 * time.Millisecond
	return cfg
}

// newOrderlyConsumer is newConsumer with cfg, shut down when the test ends.
func newOrderlyConsumer(t *testing.T, cfg consumer.Config, h consumer.Handler, opts ...consumer.Option) (*consumer.Consumer, *fakePush) {
	t.Helper()
	c, fp := newConsumer(t, cfg, h, opts...)
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c, fp
}

// F3: a failure suspends the queue for SuspendTime (never the client's -1 ms hot loop) and spends one
// attempt; every kind of failure does so, and none is answered ConsumeRetryLater.
func TestOrderly_F3_FailureSuspendsTheQueueForSuspendTime(t *testing.T) {
	for name, h := range map[string]consumer.Handler{
		"error":               handlerReturning(consumer.Outcome{}, errors.New("db down")),
		"retry with a level":  handlerReturning(consumer.Retry(3, "version gap"), nil),
		"zero outcome":        handlerReturning(consumer.Outcome{}, nil),
		"success with error":  handlerReturning(consumer.Processed(), errors.New("commit failed")),
		"retry, panic cause":  handlerReturning(consumer.Outcome{Kind: consumer.KindRetry, Cause: causelabel.Panic}, nil),
		"retry, no reason":    handlerReturning(consumer.Retry(0, ""), nil),
		"error and retry too": handlerReturning(consumer.Retry(0, "busy"), errors.New("busy")),
	} {
		t.Run(name, func(t *testing.T) {
			obs := &fakeObserver{}
			_, fp := newOrderlyConsumer(t, orderlyConfig(), h, consumer.WithObserver(obs))
			msg := orderMsg("v-1")

			a := deliverOrderly(fp, "ORDER", 2, msg)

			assert.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
			assert.NoError(t, a.err)
			assert.Equal(t, 250, a.suspendMs, "the queue pauses SuspendTime, not -1 ms")
			assert.EqualValues(t, 1, msg.ReconsumeTimes, "the message's own failure spends one attempt")
			decs := obs.decisions(msg.MsgId)
			require.Len(t, decs, 1)
			assert.Contains(t, []consumer.Kind{consumer.KindRetry, consumer.KindUnset}, decs[0].Outcome.Kind)
		})
	}
}

func TestOrderly_F3_DefaultSuspendTimeIsOneSecond(t *testing.T) {
	cfg := orderlyConfig()
	cfg.SuspendTime = 0
	_, fp := newOrderlyConsumer(t, cfg, handlerReturning(consumer.Outcome{}, errors.New("db down")))

	a := deliverOrderly(fp, "ORDER", 2, orderMsg("v-1"))

	assert.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
	assert.Equal(t, 1000, a.suspendMs)
}

func TestOrderly_F3_SuccessIsAcknowledgedWithoutSuspension(t *testing.T) {
	for _, o := range []consumer.Outcome{consumer.Processed(), consumer.Duplicate(), consumer.Stale("v5 < v7")} {
		t.Run(o.Kind.String(), func(t *testing.T) {
			obs := &fakeObserver{}
			_, fp := newOrderlyConsumer(t, orderlyConfig(), handlerReturning(o, nil), consumer.WithObserver(obs))
			msg := orderMsg("v-1")

			a := deliverOrderly(fp, "ORDER", 2, msg)

			assert.Equal(t, rmq.ConsumeSuccess, a.res)
			assert.Equal(t, -1, a.suspendMs, "no suspension asked for")
			assert.Zero(t, msg.ReconsumeTimes)
			decs := obs.decisions(msg.MsgId)
			require.Len(t, decs, 1)
			assert.Equal(t, o.Kind, decs[0].Outcome.Kind)
		})
	}
}

// F3: v1 keeps failing. MaxAttempts 2 means deliveries with Attempt 0, 1, 2; on the last one the consumer
// publishes the letter itself (the client has no DelayLevelDLQ and would send it back without a reason
// only one delivery later) and acknowledges it, so the queue moves on to v2.
func TestOrderly_F3_LastAttemptIsDeadLetteredByPublishThenAcknowledged(t *testing.T) {
	prod := &fakeProducer{status: primitive.SendOK}
	obs := &fakeObserver{}
	r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Outcome{}, errors.New("db down") }}
	_, fp := newOrderlyConsumer(t, orderlyConfig(), consumer.HandlerFunc(r.handle), withProducer(prod), consumer.WithObserver(obs))
	msg := orderMsg("v-1")
	msg.WithTag("Deposit")
	msg.WithProperty("AGGREGATE_ID", "acc-1")

	var results []rmq.ConsumeResult
	for range 3 {
		a := deliverOrderly(fp, "ORDER", 2, msg)
		require.False(t, a.sentBack, "the client's reason-less send-back is never reached")
		results = append(results, a.res)
	}

	assert.Equal(t, []rmq.ConsumeResult{rmq.SuspendCurrentQueueAMoment, rmq.SuspendCurrentQueueAMoment, rmq.ConsumeSuccess}, results)
	var attempts []int
	for _, d := range r.deliveries() {
		attempts = append(attempts, d.Attempt)
	}
	assert.Equal(t, []int{0, 1, 2}, attempts, "MaxAttempts+1 deliveries, as in concurrent consumption")
	require.Len(t, prod.sent, 1, "one letter, published by the consumer's own producer")
	l := prod.sent[0]
	assert.Equal(t, "%DLQ%cg", l.Topic)
	assert.Equal(t, "retries exhausted after 3 deliveries: db down", l.GetProperty(letter.PropReason))
	assert.Equal(t, "2", l.GetProperty(letter.PropReconsumeTimes))
	assert.Equal(t, "e-v-1", l.GetProperty("EVENT_ID"), "the message's properties are kept")
	assert.Equal(t, "acc-1", l.GetProperty("AGGREGATE_ID"))
	assert.Equal(t, "v-1", l.GetKeys())
	assert.Equal(t, "Deposit", l.GetTags())
	decs := obs.decisions(msg.MsgId)
	require.Len(t, decs, 3)
	assert.Equal(t, consumer.KindRetry, decs[0].Outcome.Kind)
	assert.Equal(t, consumer.KindRetry, decs[1].Outcome.Kind)
	assert.Equal(t, consumer.KindDeadLettered, decs[2].Outcome.Kind, "what happened: published and acknowledged")
	assert.Equal(t, causelabel.Exhausted, decs[2].Outcome.Cause)
	assert.Equal(t, consumer.KindUnset, decs[2].Chain.Kind, "the chain's own outcome is reported beside it")
}

// A dead letter the chain decided (permanent) goes through the DeadLetterSink when one is given, at once,
// keeping the chain's cause; a panic's retry on the last delivery keeps its panic class.
func TestOrderly_F3_DeadLettersGoThroughTheSinkWithTheirClass(t *testing.T) {
	for name, tc := range map[string]struct {
		o       consumer.Outcome
		attempt int32
		reason  string
		cause   string
	}{
		"permanent on the first delivery": {o: consumer.DeadLetter("unknown SKU"), reason: "unknown SKU", cause: causelabel.Permanent},
		"panic on the last delivery": {o: consumer.Outcome{Kind: consumer.KindRetry, Reason: "panic: nil map", Cause: causelabel.Panic},
			attempt: 2, reason: "retries exhausted after 3 deliveries: panic: nil map", cause: causelabel.Panic},
	} {
		t.Run(name, func(t *testing.T) {
			sink := &fakeSink{}
			obs := &fakeObserver{}
			_, fp := newOrderlyConsumer(t, orderlyConfig(), handlerReturning(tc.o, nil), consumer.WithDeadLetterSink(sink), consumer.WithObserver(obs))
			msg := orderMsg("v-1")
			msg.ReconsumeTimes = tc.attempt

			a := deliverOrderly(fp, "ORDER", 2, msg)

			assert.Equal(t, rmq.ConsumeSuccess, a.res)
			assert.Equal(t, []string{tc.reason}, sink.reasons)
			decs := obs.decisions(msg.MsgId)
			require.Len(t, decs, 1)
			assert.Equal(t, consumer.KindDeadLettered, decs[0].Outcome.Kind)
			assert.Equal(t, tc.cause, decs[0].Outcome.Cause)
		})
	}
}

// F6 in orderly mode: a failed publish is never acknowledged. The queue is suspended and the message
// handled again, without spending an attempt (the failure is the broker's, not the message's), so on its
// last delivery it stays on its last delivery until the letter is stored.
func TestOrderly_F3_FailedPublishSuspendsWithoutSpendingAnAttempt(t *testing.T) {
	prod := &fakeProducer{status: primitive.SendOK, fail: 2}
	obs := &fakeObserver{}
	r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Outcome{}, errors.New("db down") }}
	_, fp := newOrderlyConsumer(t, orderlyConfig(), consumer.HandlerFunc(r.handle), withProducer(prod), consumer.WithObserver(obs))
	msg := orderMsg("v-1")
	msg.ReconsumeTimes = 2 // the last delivery

	var results []rmq.ConsumeResult
	for range 3 {
		a := deliverOrderly(fp, "ORDER", 2, msg)
		require.False(t, a.sentBack)
		results = append(results, a.res)
		if a.res != rmq.ConsumeSuccess {
			assert.Equal(t, 250, a.suspendMs)
			assert.EqualValues(t, 2, msg.ReconsumeTimes, "still the last delivery: no attempt spent")
		}
	}

	assert.Equal(t, []rmq.ConsumeResult{rmq.SuspendCurrentQueueAMoment, rmq.SuspendCurrentQueueAMoment, rmq.ConsumeSuccess}, results)
	assert.Len(t, prod.sent, 1, "acknowledged only once the letter was stored")
	decs := obs.decisions(msg.MsgId)
	require.Len(t, decs, 3)
	assert.Equal(t, consumer.KindRetry, decs[0].Outcome.Kind, "not dead_letter: the broker moves nothing in orderly mode")
	assert.True(t, strings.HasPrefix(decs[0].Outcome.Reason, "dead-letter publish failed: "), decs[0].Outcome.Reason)
	assert.Equal(t, consumer.KindDeadLettered, decs[2].Outcome.Kind)
}

// A member of a suspended batch that succeeded, or waits for its letter, spends no attempt; the one that
// failed spends one.
func TestOrderly_F3_OnlyTheMessagesOwnFailureSpendsAnAttempt(t *testing.T) {
	cfg := orderlyConfig()
	cfg.BatchSize = 3
	sink := &fakeSink{}
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.Msg.GetKeys() {
		case "b-2":
			return consumer.Outcome{}, errors.New("db down")
		case "b-3":
			return consumer.DeadLetter("unknown SKU"), nil
		}
		return consumer.Processed(), nil
	}}
	_, fp := newOrderlyConsumer(t, cfg, consumer.HandlerFunc(r.handle), consumer.WithDeadLetterSink(sink))
	msgs := batch("b-1", "b-2", "b-3")

	a := deliverOrderly(fp, "ORDER", 2, msgs...)

	assert.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
	assert.Equal(t, []int32{0, 1, 0}, []int32{msgs[0].ReconsumeTimes, msgs[1].ReconsumeTimes, msgs[2].ReconsumeTimes})
	assert.Empty(t, sink.reasons, "a letter of a suspended batch is published when the batch is acknowledged")
}

// A message on its last delivery whose letter waits for a failing neighbour stays on its last delivery:
// its count never passes MaxAttempts, so the client never sends it to its DLQ without a reason.
func TestOrderly_F3_AttemptsNeverPassMaxAttempts(t *testing.T) {
	cfg := orderlyConfig()
	cfg.BatchSize = 2
	sink := &fakeSink{}
	_, fp := newOrderlyConsumer(t, cfg, handlerReturning(consumer.Outcome{}, errors.New("db down")), consumer.WithDeadLetterSink(sink))
	msgs := batch("b-1", "b-2")
	msgs[0].ReconsumeTimes = 2 // the last delivery: exhausted, but its neighbour is retried

	for range 3 {
		a := deliverOrderly(fp, "ORDER", 2, msgs...)
		require.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
		require.False(t, a.sentBack)
		assert.EqualValues(t, 2, msgs[0].ReconsumeTimes)
		if msgs[1].ReconsumeTimes == 2 {
			break
		}
	}

	assert.EqualValues(t, 2, msgs[1].ReconsumeTimes, "the neighbour's own failures spent its attempts")
	a := deliverOrderly(fp, "ORDER", 2, msgs...)
	assert.Equal(t, rmq.ConsumeSuccess, a.res, "both on their last delivery: both published, the batch acknowledged")
	assert.Len(t, sink.reasons, 2)
}

// A store outage past OutageWait suspends the queue (it cannot be skipped) without spending the message's
// attempt: the failure is the store's. "An attempt is spent only by the message's own failure."
func TestOrderly_F3_F19_OutagePastOutageWaitSuspendsWithoutSpendingAnAttempt(t *testing.T) {
	s := newStore()
	cfg := orderlyConfig()
	cfg.OutageWait = 200 * time.Millisecond
	obs := &fakeObserver{}
	_, fp := newOrderlyConsumer(t, cfg, consumer.HandlerFunc(s.handle), consumer.WithHealthProbe(s), consumer.WithObserver(obs))
	msg := orderMsg("v-1")
	msg.ReconsumeTimes = 2 // even on its last delivery it is not dead-lettered

	a := deliverOrderly(fp, "ORDER", 2, msg)

	assert.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
	assert.Equal(t, 250, a.suspendMs)
	assert.EqualValues(t, 2, msg.ReconsumeTimes, "no attempt spent")
	decs := obs.decisions(msg.MsgId)
	require.Len(t, decs, 1)
	assert.Equal(t, consumer.KindUnavailable, decs[0].Outcome.Kind)
}

// Shutdown: a callback that arrives after it began, and one whose handler it cancelled, are answered
// SuspendCurrentQueueAMoment (never ConsumeRetryLater, which the orderly path would skip past) once the
// client is down, without spending an attempt.
func TestOrderly_F3_F9_ShutdownNeverAnswersRetryLater(t *testing.T) {
	t.Run("late callback", func(t *testing.T) {
		r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Processed(), nil }}
		c, fp := newOrderlyConsumer(t, orderlyConfig(), consumer.HandlerFunc(r.handle))
		require.NoError(t, c.Shutdown(context.Background()))
		msg := orderMsg("v-1")

		a := deliverOrderly(fp, "ORDER", 2, msg)

		assert.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
		assert.ErrorIs(t, a.err, consumer.ErrStopped)
		assert.Equal(t, 250, a.suspendMs, "no hot loop while the client winds down")
		assert.Zero(t, msg.ReconsumeTimes)
		assert.Empty(t, r.deliveries())
	})
	t.Run("handler cancelled by Shutdown", func(t *testing.T) {
		b := newBlockingHandler()
		cfg := orderlyConfig()
		cfg.DrainTimeout = 50 * time.Millisecond
		c, fp := newOrderlyConsumer(t, cfg, consumer.HandlerFunc(b.handle))
		b.fp = fp
		require.NoError(t, c.Start())
		msg := orderMsg("v-1")
		msg.ReconsumeTimes = 2
		out := make(chan orderlyAnswer, 1)
		go func() { out <- deliverOrderly(fp, "ORDER", 2, msg) }()
		require.Equal(t, "v-1", <-b.started)

		require.ErrorIs(t, c.Shutdown(context.Background()), context.DeadlineExceeded)

		a := <-out
		assert.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
		assert.ErrorIs(t, a.err, consumer.ErrStopped)
		assert.False(t, a.sentBack)
		assert.EqualValues(t, 2, msg.ReconsumeTimes, "not the message's failure")
		calls := fp.Calls()
		assert.Equal(t, "shutdown", calls[len(calls)-1], "answered only after the client shut down (its process queues dropped)")
	})
}

func TestConfigValidate_F3_SuspendTime(t *testing.T) {
	for name, tc := range map[string]struct {
		orderly bool
		suspend time.Duration
		ok      bool
	}{
		"orderly, default":         {orderly: true, ok: true},
		"orderly, lower edge":      {orderly: true, suspend: 10 * time.Millisecond, ok: true},
		"orderly, upper edge":      {orderly: true, suspend: 30 * time.Second, ok: true},
		"orderly, below":           {orderly: true, suspend: 10*time.Millisecond - time.Millisecond},
		"orderly, above":           {orderly: true, suspend: 30*time.Second + time.Millisecond},
		"orderly, negative":        {orderly: true, suspend: -time.Second},
		"concurrent, unset":        {ok: true},
		"concurrent, set (no use)": {suspend: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Orderly, cfg.SuspendTime = tc.orderly, tc.suspend
			err := cfg.Validate()
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, []string{"SuspendTime"}, fields(t, err))
		})
	}
}

func TestNew_F3_OrderlyReachesTheClient(t *testing.T) {
	for name, tc := range map[string]struct {
		suspend time.Duration
		want    time.Duration
	}{
		"default": {want: time.Second},
		"set":     {suspend: 100 * time.Millisecond, want: 100 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			var got []rmq.Option
			cfg := validConfig()
			cfg.Orderly, cfg.SuspendTime = true, tc.suspend
			_, err := consumer.New(cfg, handlerReturning(consumer.Processed(), nil),
				consumer.WithPushConsumer(func(opts []rmq.Option) (irmq.PushConsumer, error) {
					got = opts
					return newFakePush(), nil
				}))
			require.NoError(t, err)

			o := clientOptions(t, got)

			assert.True(t, o.FieldByName("ConsumeOrderly").Bool(), "the client's WithConsumerOrder")
			assert.EqualValues(t, tc.want, o.FieldByName("SuspendCurrentQueueTimeMillis").Int())
			assert.EqualValues(t, 16, o.FieldByName("MaxReconsumeTimes").Int(),
				"not the client's unlimited orderly default")
		})
	}
	var got []rmq.Option
	_, err := consumer.New(validConfig(), handlerReturning(consumer.Processed(), nil),
		consumer.WithPushConsumer(func(opts []rmq.Option) (irmq.PushConsumer, error) {
			got = opts
			return newFakePush(), nil
		}))
	require.NoError(t, err)
	assert.False(t, clientOptions(t, got).FieldByName("ConsumeOrderly").Bool(), "concurrent by default")
}
