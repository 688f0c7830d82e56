package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// TestE2E_F12_S7_AggregateVersionsThroughTheBroker: order-1 v7, then v5, then v7 again (a new message with
// v7's event ID), each sent once the previous one is decided: v7 applies, v5 is acknowledged as stale
// (rmqguard_stale_total 1, its processed_event row STALE, no effect), the second v7 is a duplicate; the
// stored version stays 7. order-2 v5 then v7 applies both in order. Versions are monotonic, not dense
// (GapApply, no gap retries). Nothing reaches the DLQ.
func TestE2E_F12_S7_AggregateVersionsThroughTheBroker(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	ledger := testenv.NewLedger(t, db, w.run)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	version, err := middleware.Version(store, middleware.VersionConfig{AggregateType: "order",
		GapRetries: middleware.NoGapRetries, OnGap: middleware.GapApply})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), ledger.Append(ctx, tx, d.EventID)
	}), testenv.Must(middleware.Metrics(m)), middleware.Recover(log), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store)), version))
	w.start(consumer.Config{MaxAttempts: 3}, h, consumer.WithLogger(log), consumer.WithObserver(m))

	count := func(outcome string) float64 {
		return testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, outcome))
	}
	// sendAndWait sends one event and waits until the consumer decided want for it (the counter grows).
	sendAndWait := func(event, aggregate string, v int64, want string) {
		t.Helper()
		before := count(want)
		msg := primitive.NewMessage(w.topic, []byte(`{}`))
		msg.WithProperty("EVENT_ID", w.run+"-"+event)
		msg.WithProperty("AGGREGATE_ID", w.run+"-"+aggregate)
		msg.WithProperty("AGGREGATE_VERSION", strconv.FormatInt(v, 10))
		w.send(msg)
		require.Eventually(t, func() bool { return count(want) == before+1 }, 30*time.Second, 100*time.Millisecond,
			"%s v%d: want %s; processed %v duplicate %v stale %v retry %v", event, v, want,
			count("processed"), count("duplicate"), count("stale"), count("retry"))
	}
	stored := func(aggregate string) int64 {
		var v int64
		require.NoError(t, db.Get(&v, `SELECT version FROM aggregate_version
			WHERE consumer_group = ? AND aggregate_type = 'order' AND aggregate_id = ?`, w.group, w.run+"-"+aggregate))
		return v
	}

	sendAndWait("o1-v7", "order-1", 7, "processed")
	sendAndWait("o1-v5", "order-1", 5, "stale")
	sendAndWait("o1-v7", "order-1", 7, "duplicate")
	assert.Equal(t, int64(7), stored("order-1"), "order-1 stays at v7")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Stale.WithLabelValues(w.group, w.topic)), "rmqguard_stale_total")
	var status string
	require.NoError(t, db.Get(&status, `SELECT result_status FROM processed_event WHERE consumer_group = ? AND event_id = ?`,
		w.group, w.run+"-o1-v5"))
	assert.Equal(t, dedupsql.ResultStale, status)
	assert.Equal(t, 0, ledger.Count(t, w.run+"-o1-v5"), "the stale event wrote nothing")

	sendAndWait("o2-v5", "order-2", 5, "processed")
	assert.Equal(t, int64(5), stored("order-2"))
	sendAndWait("o2-v7", "order-2", 7, "processed")
	assert.Equal(t, int64(7), stored("order-2"))

	ledger.RequireOncePerEvent(t, 3)
	assert.Zero(t, count("retry"))
	w.requireNoDeadLetters()
}
