package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// TestE2E_F24_RenamedGroupWithTheSameDedupScopeAppliesNothingTwice: group A with dedup scope S (A's own
// name) processes 1,000 events from the broker; the group is renamed (a new group B, same scope S) and
// re-reads the topic from its first offset: its handler never runs, 1,000 duplicates are counted for B,
// and the effects stay at 1,000.
func TestE2E_F24_RenamedGroupWithTheSameDedupScopeAppliesNothingTwice(t *testing.T) {
	w := newWorld(t, 4)
	db := shoptest.MySQL(t)
	scope, renamed := w.group, w.group+"-v2"
	require.NoError(t, rmq.EnsureGroupTopics(w.ctx, w.ns, testenv.Broker(t), renamed))
	plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: 1000}.Plan()
	require.NoError(t, err)
	require.Equal(t, 1000, plan.Events)
	w.send(plan.Messages...)

	store, err := dedup.NewStore(db, dedup.WithScope(scope))
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	run := func(group string, calls *atomic.Int64, done func(m *metrics.Metrics) bool) {
		m, err := metrics.New(prometheus.NewRegistry())
		require.NoError(t, err)
		eventID, err := middleware.EventID(middleware.EventIDConfig{})
		require.NoError(t, err)
		h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			calls.Add(1)
			return shop.HandleOrderCreated(ctx, tx, d)
		}), testenv.Must(middleware.Metrics(m)), middleware.Recover(log), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
		g := *w
		g.group = group
		c := g.start(consumer.Config{MaxAttempts: 3, DrainTimeout: 10 * time.Second}, h, consumer.WithLogger(log), consumer.WithObserver(m))
		require.Eventually(t, func() bool { return done(m) }, 3*time.Minute, 500*time.Millisecond, "group %s", group)
		require.NoError(t, c.Shutdown(w.ctx))
	}

	var callsA, callsB atomic.Int64
	run(scope, &callsA, func(*metrics.Metrics) bool {
		orders, _, err := shop.Effects(w.ctx, db, w.run+"-o")
		return err == nil && orders == plan.Events
	})
	var duplicatesB float64
	run(renamed, &callsB, func(m *metrics.Metrics) bool {
		// The same messages, read again by the renamed group: the rows hold their message IDs.
		duplicatesB = testutil.ToFloat64(m.Duplicates.WithLabelValues(renamed, w.topic, "redelivery"))
		return duplicatesB >= float64(plan.Events)
	})

	orders, reservations, err := shop.Effects(w.ctx, db, w.run+"-o")
	require.NoError(t, err)
	assert.Equal(t, plan.Events, orders, "no second effect")
	assert.Equal(t, plan.Events, reservations)
	assert.GreaterOrEqual(t, callsA.Load(), int64(plan.Events))
	assert.Zero(t, callsB.Load(), "the renamed group's handler never ran")
	assert.Equal(t, float64(plan.Events), duplicatesB, "1,000 duplicates counted for the renamed group")
	rows := map[string]int{}
	var byGroup []struct {
		Group string `db:"consumer_group"`
		N     int    `db:"n"`
	}
	require.NoError(t, db.Select(&byGroup, `SELECT consumer_group, COUNT(*) AS n FROM processed_event
		WHERE consumer_group IN (?, ?) GROUP BY consumer_group`, scope, renamed))
	for _, r := range byGroup {
		rows[r.Group] = r.N
	}
	assert.Equal(t, map[string]int{scope: plan.Events}, rows, "the rows are the scope's, none the renamed group's")
}
