package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// TestE2E_F21_BatchDeadLetterWithoutSinkLeavesItsNeighboursOutOfTheDLQ: no DeadLetterSink, BatchSize 4, one
// queue, b-1..b-4 queued before the consumer starts, b-3 fails permanently. b-1, b-2, b-4 take effect once
// and never appear in %DLQ%<group>; b-3 is the only letter, published by the consumer with its reason.
func TestE2E_F21_BatchDeadLetterWithoutSinkLeavesItsNeighboursOutOfTheDLQ(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: 4}.Plan()
	require.NoError(t, err)
	w.send(plan.Messages...) // before the consumer starts: its first pull hands all four over together
	b3 := plan.Messages[2].GetProperty("EVENT_ID")

	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	handler := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == b3 {
			return consumer.Outcome{}, retry.Permanent(errors.New("b-3 is rejected for good"))
		}
		return shop.HandleOrderCreated(ctx, tx, d)
	}), testenv.Must(middleware.Metrics(m)), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	c := w.start(consumer.Config{BatchSize: 4, MaxAttempts: 3}, handler, consumer.WithObserver(m))

	var letters []*primitive.MessageExt
	require.Eventually(t, func() bool {
		letters, err = dlqtool.Read(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, 10)
		return err == nil && len(letters) >= 1
	}, 60*time.Second, time.Second, "b-3 reaches %%DLQ%%%s", w.group)
	time.Sleep(3 * time.Second) // a neighbour dead-lettered by the broker would arrive within this
	require.NoError(t, c.Shutdown(w.ctx))

	letters, err = dlqtool.Read(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, 10)
	require.NoError(t, err)
	require.Len(t, letters, 1, "b-3 is the only letter")
	assert.Equal(t, b3, letters[0].GetProperty("EVENT_ID"))
	assert.Contains(t, letters[0].GetProperty(letter.PropReason), "rejected for good", "published by the consumer, with its reason")
	orders, reservations, err := shop.Effects(w.ctx, db, w.run)
	require.NoError(t, err)
	assert.Equal(t, 3, orders, "b-1, b-2, b-4 took effect once")
	assert.Equal(t, 3, reservations)
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "processed")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "dead_lettered")),
		"b-3 counted once, at its final decision: published by the consumer")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues(w.group, w.topic, "permanent")))
}

// TestE2E_F26_RetriedMessageOfADroppedTagIsAcknowledgedNotHandled: the group subscribes ORDER with
// "OrderCreated || OrderPaid"; an OrderPaid fails and waits in %RETRY%<group> (the consumer is shut down
// right after the failure, since delay levels are 1 s here); the consumer restarts subscribed to
// OrderCreated only: the retried OrderPaid is acknowledged and counted as unsubscribed, never handled.
func TestE2E_F26_RetriedMessageOfADroppedTagIsAcknowledgedNotHandled(t *testing.T) {
	w := newWorld(t, 1)
	var mu sync.Mutex
	var handled []string // tag@attempt
	failed := make(chan struct{}, 1)
	handler := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		mu.Lock()
		handled = append(handled, d.Msg.GetTags()+"@"+string(rune('0'+d.Attempt)))
		mu.Unlock()
		if d.Msg.GetTags() == "OrderPaid" {
			failed <- struct{}{}
			return consumer.Retry(0, "payment service down"), nil
		}
		return consumer.Processed(), nil
	}
	start := func(expr string, m *metrics.Metrics) *consumer.Consumer {
		cfg := consumer.Config{NameServers: w.ns, Group: w.group, StartFromFirstOffset: true, MaxAttempts: 3,
			Subscriptions: []consumer.Subscription{{Topic: w.topic, Expression: expr}}}
		c, err := consumer.New(cfg, consumer.HandlerFunc(handler), consumer.WithObserver(m))
		require.NoError(t, err)
		require.NoError(t, c.Start())
		t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
		return c
	}
	m1, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	c1 := start("OrderCreated || OrderPaid", m1)
	paid := primitive.NewMessage(w.topic, []byte(`{}`))
	paid.WithTag("OrderPaid")
	w.send(paid)
	select {
	case <-failed:
	case <-time.After(60 * time.Second):
		t.Fatal("OrderPaid was not delivered")
	}
	time.Sleep(200 * time.Millisecond) // the client sends it back to %RETRY% (1 s delay) after our answer
	require.NoError(t, c1.Shutdown(w.ctx))

	m2, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	start("OrderCreated", m2)
	created := primitive.NewMessage(w.topic, []byte(`{}`))
	created.WithTag("OrderCreated")
	w.send(created)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(m2.UnsubscribedMessages.WithLabelValues(w.group, w.topic)) == 1
	}, 90*time.Second, 250*time.Millisecond, "the retried OrderPaid is counted as unsubscribed")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) >= 2
	}, 30*time.Second, 100*time.Millisecond, "the new OrderCreated is handled")
	time.Sleep(3 * time.Second) // an acknowledged message does not come back; a retried one would within this
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"OrderPaid@0", "OrderCreated@0"}, handled, "the retried OrderPaid never reached the handler")
	assert.Equal(t, 1.0, testutil.ToFloat64(m2.UnsubscribedMessages.WithLabelValues(w.group, w.topic)), "acknowledged once")
}
