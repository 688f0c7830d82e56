package consumer_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/metrics"
)

// F10/F21 with the real collectors: a batch whose dead letter cannot be published is retried; its
// redelivery publishes the letter. rmqguard_messages_total counts what the broker was told each time,
// once per message and delivery; nothing is counted as dead_letter before the letter is in the DLQ.
func TestDecision_F21_MetricsCountTheFinalDecisionOnce(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	sink := &fakeSink{err: errDLQSend}
	cfg := validConfig()
	cfg.BatchSize, cfg.HandlerTimeout, cfg.OutageWait = 4, time.Second, 200*time.Millisecond
	dedupSeen := map[string]bool{}
	h := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-3" {
			return consumer.DeadLetter("poison"), nil
		}
		if dedupSeen[d.Msg.MsgId] {
			o := consumer.Duplicate()
			o.Cause = causelabel.Redelivery
			return o, nil
		}
		dedupSeen[d.Msg.MsgId] = true
		return consumer.Processed(), nil
	}
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithObserver(m), consumer.WithDeadLetterSink(sink))
	count := func(outcome string) float64 {
		return testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", outcome))
	}

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)
	require.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, 3.0, count("processed"))
	assert.Equal(t, 1.0, count("retry"), "b-3: its publish failed, the batch is retried")
	assert.Zero(t, count("dead_letter")+count("dead_lettered"), "not in the DLQ yet")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.BatchRetried.WithLabelValues("cg", "ORDER")))

	sink.mu.Lock()
	sink.err = nil
	sink.mu.Unlock()
	redelivered := batch("b-1", "b-2", "b-3", "b-4")
	for _, msg := range redelivered {
		msg.ReconsumeTimes = 1
	}
	res, _ = fp.deliver(t, "ORDER", redelivered...)
	require.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, 3.0, count("duplicate"))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Duplicates.WithLabelValues("cg", "ORDER", "redelivery")))
	assert.Equal(t, 1.0, count("dead_lettered"))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues("cg", "ORDER", "permanent")))
	assert.Equal(t, 8.0, count("processed")+count("retry")+count("duplicate")+count("dead_lettered"), "4 messages × 2 deliveries")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.HandlersInFlight.WithLabelValues("cg")))
}

// Start announces the group's topics to an observer that wants them, before the first message, so the
// counters exist at zero when the first one is counted (rate() would miss an increment from "no series").
func TestStart_SubscriptionObserverGetsTheGroupAndTopicsFirst(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	c, _ := newConsumer(t, validConfig(), consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}), consumer.WithObserver(m))
	require.Zero(t, testutil.CollectAndCount(m.Duplicates), "nothing before Start")

	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })

	assert.Equal(t, 4, testutil.CollectAndCount(m.Duplicates), "cg/ORDER, one series per cause (unknown included)")
	assert.Zero(t, testutil.ToFloat64(m.Duplicates.WithLabelValues("cg", "ORDER", "resend")))
	assert.Zero(t, testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", "processed")))
}
