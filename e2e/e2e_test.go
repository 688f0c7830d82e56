// Package e2e runs rmqguard end to end through the real RocketMQ broker, MariaDB and the example domain.
package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/rmqadmin"
	"github.com/rmqguard/rmqguard/internal/shop"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// redeliveries records what the chain saw of redelivered messages (ReconsumeTimes > 0).
type redeliveries struct {
	mu     sync.Mutex
	topics map[string]int // Delivery.Topic → count
}

func (r *redeliveries) middleware() consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.Attempt > 0 {
				r.mu.Lock()
				r.topics[d.Topic]++
				r.mu.Unlock()
			}
			return next(ctx, d)
		}
	}
}

func (r *redeliveries) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.topics))
	for k, v := range r.topics {
		out[k] = v
	}
	return out
}

// TestE2E_S1_F4_F11_500EventsWithDuplicatesAndPoison sends 500 messages (10 % re-sends with new message
// IDs and the same EVENT_ID, 10 failing once, one poison) through the broker and checks that every
// distinct event took effect once, the re-sends were counted as duplicates, retried messages were seen
// with their original topic (F4), and the poison message alone is in %DLQ%<group> with its reason.
func TestE2E_S1_F4_F11_500EventsWithDuplicatesAndPoison(t *testing.T) {
	ns := testenv.NameServer(t)
	broker := testenv.Broker(t)
	db := testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	run := testenv.Unique("e2e")
	topic := "RMQGUARD_E2E_" + strings.ReplaceAll(run, "-", "_")
	group := "rmqguard-e2e-" + run
	require.NoError(t, rmqadmin.EnsureTopic(ctx, []string{ns}, broker, topic, 4))
	require.NoError(t, rmqadmin.EnsureGroupTopics(ctx, []string{ns}, broker, group))

	plan, err := shop.Workload{RunID: run, Topic: topic, Messages: 500, DuplicateShare: 0.1, FailOnce: 10, Poison: true}.Plan()
	require.NoError(t, err)

	prod, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		producer.WithGroupName(group+"-producer"), producer.WithInstanceName(run+"-producer"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, prod.Start())
	defer func() { _ = prod.Shutdown() }()

	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	// The client logs from goroutines that outlive the test, so its rlog output stays on its own writer.
	rlog.SetLogLevel("warn")
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	seen := &redeliveries{topics: map[string]int{}}
	handler := middleware.Chain(dedup.Handle(shop.HandleOrderCreated),
		middleware.Metrics(m), seen.middleware(), middleware.Recover(log), middleware.Classify(),
		eventID, middleware.Timeout(10*time.Second), middleware.Dedup(store))
	publisher, err := dlq.NewPublisher(prod)
	require.NoError(t, err)
	c, err := consumer.New(consumer.Config{
		NameServers: []string{ns}, Group: group, Subscriptions: []consumer.Subscription{{Topic: topic}},
		MaxAttempts: 3, StartFrom: consumer.StartFromFirstOffset, DrainTimeout: 10 * time.Second,
	}, handler, consumer.WithLogger(log), consumer.WithDeadLetterSink(publisher))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Shutdown(context.Background())
		}
	}()

	for _, msg := range plan.Messages {
		res, err := prod.SendSync(ctx, msg)
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, res.Status)
	}

	prefix := run + "-o"
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(ctx, db, prefix)
		return err == nil && orders >= plan.Events &&
			testutil.ToFloat64(m.Messages.WithLabelValues(group, topic, "dead_letter")) >= 1
	}, 3*time.Minute, 500*time.Millisecond, "all %d events take effect and the poison is dead-lettered", plan.Events)
	require.NoError(t, c.Shutdown(ctx))
	stopped = true

	orders, reservations, err := shop.Effects(ctx, db, prefix)
	require.NoError(t, err)
	assert.Equal(t, plan.Events, orders, "one order per distinct event")
	assert.Equal(t, plan.Events, reservations, "one reservation per distinct event")
	var dedupRows int
	require.NoError(t, db.GetContext(ctx, &dedupRows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, group))
	assert.Equal(t, plan.Events, dedupRows)
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.Duplicates.WithLabelValues(group, topic)), float64(plan.Duplicates))

	redelivered := seen.snapshot()
	assert.GreaterOrEqual(t, redelivered[topic], 10, "F4: the failOnce events came back with their original topic: %v", redelivered)
	for tpc := range redelivered {
		assert.False(t, strings.HasPrefix(tpc, consumer.RetryTopicPrefix), "F4: no delivery is presented on %s", tpc)
	}

	letters, err := dlq.Read(ctx, []string{ns}, group, 100)
	require.NoError(t, err)
	require.Len(t, letters, 1, "only the poison message is dead-lettered")
	letter := letters[0]
	assert.Equal(t, plan.PoisonEventID, letter.GetProperty("EVENT_ID"))
	assert.Equal(t, topic, letter.GetProperty(primitive.PropertyRetryTopic))
	assert.Contains(t, letter.GetProperty(dlq.PropReason), "not valid JSON")
	assert.Equal(t, run+"-poison", letter.GetKeys())
}
