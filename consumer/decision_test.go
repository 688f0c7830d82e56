package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// onlyDecision returns the one decision reported for the message with msgID, failing unless there is
// exactly one.
func onlyDecision(t *testing.T, obs *fakeObserver, msgID string) consumer.Decision {
	t.Helper()
	ds := obs.decisions(msgID)
	require.Len(t, ds, 1, "the final decision about %s is reported once", msgID)
	return ds[0]
}

// F6/F21: a batch whose dead letter cannot be published within OutageWait is retried as a whole. b-3's
// chain said dead letter, but the broker is told retry: that is what is reported (and logged at warn);
// its neighbours are reported processed, with the batch's retry visible.
func TestDecision_F21_BatchDeadLetterWhosePublishFailsIsReportedAsRetry(t *testing.T) {
	obs := &fakeObserver{}
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := validConfig()
	cfg.BatchSize, cfg.HandlerTimeout, cfg.OutageWait = 4, time.Second, 200*time.Millisecond
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(b3Poison), consumer.WithObserver(obs), consumer.WithLogger(zap.New(core)),
		consumer.WithDeadLetterSink(&fakeSink{err: errDLQSend}))

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	require.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, 4, obs.decidedCount(), "one decision per message")
	b3 := onlyDecision(t, obs, "msg-b-3")
	assert.Equal(t, consumer.KindRetry, b3.Outcome.Kind, "the broker is told retry, not dead letter")
	assert.Equal(t, consumer.KindDeadLetter, b3.Chain.Kind)
	assert.Contains(t, b3.Outcome.Reason, "dead-letter publish failed")
	for _, id := range []string{"msg-b-1", "msg-b-2", "msg-b-4"} {
		d := onlyDecision(t, obs, id)
		assert.Equal(t, consumer.KindProcessed, d.Outcome.Kind, "%s is what it is: processed", id)
		assert.True(t, d.BatchRetried, "%s comes back with the batch", id)
	}
	retried := logs.FilterMessage("message retried").All()
	require.Len(t, retried, 1, "one line for b-3's changed decision")
	assert.Equal(t, zapcore.WarnLevel, retried[0].Level)
	assert.Equal(t, "dead_letter", retried[0].ContextMap()["chain_outcome"])
	assert.Equal(t, "retry", retried[0].ContextMap()["outcome"])
}

// F10: a batch retried because of one member: the processed members are reported processed with
// BatchRetried (they come back as duplicates), the failing one as a retry.
func TestDecision_F10_RetriedBatchReportsProcessedMembersAsProcessed(t *testing.T) {
	obs := &fakeObserver{}
	h := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-2" {
			return consumer.Outcome{}, errors.New("db down")
		}
		return consumer.Processed(), nil
	}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(h), consumer.WithObserver(obs))

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3")...)

	require.Equal(t, rmq.ConsumeRetryLater, res)
	b2 := onlyDecision(t, obs, "msg-b-2")
	assert.Equal(t, consumer.KindRetry, b2.Outcome.Kind, "an error with the zero outcome is a retry")
	assert.EqualError(t, b2.Err, "db down")
	assert.False(t, b2.BatchRetried, "its own outcome is the retry")
	for _, id := range []string{"msg-b-1", "msg-b-3"} {
		d := onlyDecision(t, obs, id)
		assert.Equal(t, consumer.KindProcessed, d.Outcome.Kind)
		assert.True(t, d.BatchRetried)
	}
}

// F6: a dead letter delivered alone and published through the sink is reported dead_lettered (logged at
// error); a handler's own dead letter has the reason class permanent.
func TestDecision_F6_SingleDeadLetterPublishedBySinkIsDeadLettered(t *testing.T) {
	obs := &fakeObserver{}
	core, logs := observer.New(zapcore.InfoLevel)
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("bad payload"), nil),
		consumer.WithObserver(obs), consumer.WithDeadLetterSink(&fakeSink{}), consumer.WithLogger(zap.New(core)))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	require.Equal(t, rmq.ConsumeSuccess, res)
	d := onlyDecision(t, obs, "msg-o-1")
	assert.Equal(t, consumer.KindDeadLettered, d.Outcome.Kind)
	assert.Equal(t, causelabel.Permanent, d.Outcome.Cause)
	assert.Equal(t, "bad payload", d.Outcome.Reason)
	lines := logs.FilterMessage("message dead-lettered").All()
	require.Len(t, lines, 1)
	assert.Equal(t, zapcore.ErrorLevel, lines[0].Level)
	assert.Equal(t, "dead_lettered", lines[0].ContextMap()["outcome"])
}

// F6: without a sink, or when the sink fails, a single dead letter is answered with delay level -1: the
// broker dead-letters it (dead_letter), keeping the chain's reason class.
func TestDecision_F6_BrokerDLQPathIsDeadLetter(t *testing.T) {
	unidentifiable := consumer.DeadLetter("no event ID")
	unidentifiable.Cause = causelabel.Unidentifiable
	for name, sink := range map[string]consumer.Option{
		"no sink":     consumer.WithDeadLetterSink(nil),
		"sink failed": consumer.WithDeadLetterSink(&fakeSink{err: errDLQSend}),
	} {
		t.Run(name, func(t *testing.T) {
			obs := &fakeObserver{}
			_, fp := newConsumer(t, validConfig(), handlerReturning(unidentifiable, nil), consumer.WithObserver(obs), sink)

			res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

			require.Equal(t, rmq.ConsumeRetryLater, res)
			require.Equal(t, consumer.DelayLevelDLQ, delay)
			d := onlyDecision(t, obs, "msg-o-1")
			assert.Equal(t, consumer.KindDeadLetter, d.Outcome.Kind)
			assert.Equal(t, causelabel.Unidentifiable, d.Outcome.Cause)
		})
	}
}

// F5: a retry on the last delivery is dead-lettered by the broker: reported dead_letter, reason class
// exhausted unless the retry named its cause (a panic, a timeout).
func TestDecision_F5_RetryOnTheLastDeliveryIsDeadLetterExhausted(t *testing.T) {
	timedOut := consumer.Retry(0, "handler timeout")
	timedOut.Cause = causelabel.Timeout
	for want, o := range map[string]consumer.Outcome{
		causelabel.Exhausted: consumer.Retry(0, "payment service down"),
		causelabel.Timeout:   timedOut,
	} {
		t.Run(string(want), func(t *testing.T) {
			obs := &fakeObserver{}
			cfg := validConfig()
			cfg.MaxAttempts = 3
			_, fp := newConsumer(t, cfg, handlerReturning(o, nil), consumer.WithObserver(obs))
			last := orderMsg("o-1")
			last.ReconsumeTimes = 3

			res, _ := fp.deliver(t, "ORDER", last)

			require.Equal(t, rmq.ConsumeRetryLater, res)
			d := onlyDecision(t, obs, "msg-o-1")
			assert.Equal(t, consumer.KindDeadLetter, d.Outcome.Kind)
			assert.Equal(t, want, d.Outcome.Cause)
			assert.Equal(t, consumer.KindRetry, d.Chain.Kind)
		})
	}
}

// F9: a handler cancelled by Shutdown is not answered, and its message is not reported at all (never as
// a retry): it comes back after a restart as it was.
func TestDecision_F9_UnansweredCallbackIsNotReported(t *testing.T) {
	obs := &fakeObserver{}
	b := newBlockingHandler()
	cfg := validConfig()
	cfg.DrainTimeout = 50 * time.Millisecond
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(b.handle), consumer.WithObserver(obs))
	b.fp = fp
	require.NoError(t, c.Start())
	result := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	require.Equal(t, "o-1", <-b.started)

	require.ErrorIs(t, c.Shutdown(context.Background()), context.DeadlineExceeded)

	r := <-result
	require.ErrorIs(t, r.err, consumer.ErrStopped, "not answered")
	assert.Zero(t, obs.decidedCount(), "no final decision reported")
	late := <-deliverAsync(fp, "ORDER", orderMsg("o-2"))
	assert.ErrorIs(t, late.err, consumer.ErrStopped)
	assert.Zero(t, obs.decidedCount(), "a callback after Shutdown is not reported either")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, 1, obs.maxInFlight, "the cancelled handler was in flight")
	assert.Zero(t, obs.inFlight, "and is no longer")
}

// S1/S3/S5/F11/F41: a duplicate keeps the cause the chain found (the dedup row); without one its cause is
// unknown, never guessed from the message: a replay message may be redelivered (the row holds its own ID),
// a redelivery after a lost offset commit has ReconsumeTimes 0, a re-send the broker retried has more.
func TestDecision_F41_DuplicateCauseIsTheChainsOrUnknown(t *testing.T) {
	fromRow := consumer.Duplicate()
	fromRow.Cause = causelabel.Redelivery
	bogus := consumer.Duplicate()
	bogus.Cause = causelabel.Permanent
	replayed := orderMsg("r-1")
	replayed.WithProperty(letter.PropReplayID, "replay-7")
	redelivered := orderMsg("d-1")
	redelivered.ReconsumeTimes = 1
	for name, tc := range map[string]struct {
		o    consumer.Outcome
		msg  *primitive.MessageExt
		want string
	}{
		"the chain's cause":                 {fromRow, orderMsg("c-1"), causelabel.Redelivery},
		"replay provenance, no cause":       {consumer.Duplicate(), replayed, causelabel.Unknown},
		"ReconsumeTimes above 0, no cause":  {consumer.Duplicate(), redelivered, causelabel.Unknown},
		"first delivery, no cause":          {consumer.Duplicate(), orderMsg("n-1"), causelabel.Unknown},
		"a cause that is not a duplicate's": {bogus, orderMsg("b-1"), causelabel.Unknown},
	} {
		t.Run(name, func(t *testing.T) {
			obs := &fakeObserver{}
			_, fp := newConsumer(t, validConfig(), handlerReturning(tc.o, nil), consumer.WithObserver(obs))

			res, _ := fp.deliver(t, "ORDER", tc.msg)

			require.Equal(t, rmq.ConsumeSuccess, res)
			d := onlyDecision(t, obs, tc.msg.MsgId)
			assert.Equal(t, consumer.KindDuplicate, d.Outcome.Kind)
			assert.Equal(t, tc.want, d.Outcome.Cause)
		})
	}
}

// The lag poller reads GetOffsetDiffMap every LagInterval, reports each topic, reports 0 for a topic whose
// queues went to another consumer, and stops with Shutdown.
func TestLag_PolledFromTheClientAndStoppedByShutdown(t *testing.T) {
	obs := &fakeObserver{}
	cfg := validConfig()
	cfg.LagInterval = 100 * time.Millisecond
	c, fp := newConsumer(t, cfg, handlerReturning(consumer.Processed(), nil), consumer.WithObserver(obs))
	fp.setLag(map[string]int64{"ORDER": 42, "%RETRY%cg": 3})
	require.NoError(t, c.Start())

	lagOf := func(topic string) (int64, bool) {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		n, ok := obs.lag["cg/"+topic]
		return n, ok
	}
	require.Eventually(t, func() bool {
		n, ok := lagOf("ORDER")
		r, rok := lagOf("%RETRY%cg")
		return ok && rok && n == 42 && r == 3
	}, 5*time.Second, 10*time.Millisecond)
	fp.setLag(map[string]int64{"ORDER": 7})
	require.Eventually(t, func() bool {
		n, _ := lagOf("ORDER")
		r, _ := lagOf("%RETRY%cg")
		return n == 7 && r == 0
	}, 5*time.Second, 10*time.Millisecond, "a topic no longer held reports 0")

	require.NoError(t, c.Shutdown(context.Background()))
	fp.mu.Lock()
	reads := fp.lagReads
	fp.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // three intervals: a poller still running would read again
	fp.mu.Lock()
	defer fp.mu.Unlock()
	assert.Equal(t, reads, fp.lagReads, "the poller stopped with Shutdown")
}

// Without an observer nothing is polled.
func TestLag_NotPolledWithoutObserver(t *testing.T) {
	cfg := validConfig()
	cfg.LagInterval = 100 * time.Millisecond
	c, fp := newConsumer(t, cfg, handlerReturning(consumer.Processed(), nil))
	require.NoError(t, c.Start())
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, c.Shutdown(context.Background()))
	fp.mu.Lock()
	defer fp.mu.Unlock()
	assert.Zero(t, fp.lagReads)
}

func TestConfigValidate_LagIntervalBelow100msIsRefused(t *testing.T) {
	cfg := validConfig()
	cfg.LagInterval = 10 * time.Millisecond
	var ce *consumer.ConfigError
	require.ErrorAs(t, cfg.Validate(), &ce)
	assert.Equal(t, "LagInterval", ce.Field)
}

// In a namespace the client names topics "ns%T" and "%RETRY%ns%G"; the lag is labelled without it, like
// Delivery.Topic.
func TestLag_TopicsAreNamedWithoutTheNamespace(t *testing.T) {
	obs := &fakeObserver{}
	cfg := validConfig()
	cfg.Namespace, cfg.LagInterval = "ns1", 100*time.Millisecond
	c, fp := newConsumer(t, cfg, handlerReturning(consumer.Processed(), nil), consumer.WithObserver(obs))
	fp.setLag(map[string]int64{"ns1%ORDER": 5, "%RETRY%ns1%cg": 2})
	require.NoError(t, c.Start())
	defer func() { require.NoError(t, c.Shutdown(context.Background())) }()

	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.lag["cg/ORDER"] == 5 && obs.lag["cg/%RETRY%cg"] == 2
	}, 5*time.Second, 10*time.Millisecond, "the lag is labelled without the namespace")
}
