package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// TestE2E_BatchModeSharesOneTransactionPerCallback: BatchSize 32 on the real broker, 64 messages
// (a quarter re-sends of earlier events, two events failing their first attempt) queued before the
// consumer starts. The members of a callback share one dedup transaction (far fewer transactions than
// messages handled), the failing members make their batches retries whose committed members come back as
// duplicates, and every event takes effect exactly once.
func TestE2E_BatchModeSharesOneTransactionPerCallback(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: 64, DuplicateShare: 0.25, FailOnce: 2}.Plan()
	require.NoError(t, err)
	w.send(plan.Messages...)
	ledger := testenv.NewLedger(t, db, w.run)

	var mu sync.Mutex
	txns := map[*sqlx.Tx]bool{}
	handled := 0
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		mu.Lock()
		txns[tx] = true
		handled++
		mu.Unlock()
		return shop.HandleOrderCreated(ctx, tx, d)
	})), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	c := w.start(consumer.Config{BatchSize: 32, MaxAttempts: 5}, handler)

	require.Eventually(t, func() bool {
		events, _ := ledger.Totals(t)
		return events == plan.Events
	}, 90*time.Second, 200*time.Millisecond, "all %d events take effect", plan.Events)
	time.Sleep(3 * time.Second) // a second apply would arrive within this (delay levels are 1 s)
	require.NoError(t, c.Shutdown(w.ctx))

	ledger.RequireOncePerEvent(t, plan.Events)
	orders, _, err := shop.Effects(w.ctx, db, w.run)
	require.NoError(t, err)
	assert.Equal(t, plan.Events, orders)
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, handled, plan.Events+2, "the two failing events ran again after their batch's retry")
	assert.Less(t, len(txns), handled/2, "members share their callback's transaction (%d transactions for %d handler runs)", len(txns), handled)
	w.requireNoDeadLetters()
}
