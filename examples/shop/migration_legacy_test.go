package shop_test

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/migrate"
)

// Migrations 00002 and 00003 on a database of the OrderCreated-only example with its dedup rows: the
// legacy CREATED orders can then be cancelled by the compensation job (the release lands on the backfilled
// stock row) and paid, and the whole database, dedup rows of the old group included, reconciles.
func TestMigration_LegacyOrdersCanBeCancelledAndReconcile(t *testing.T) {
	db := scratchDB(t)
	old, err := os.ReadFile("migrations/00001_orders_inventory.sql")
	require.NoError(t, err)
	_, err = dedup.Migrate(t.Context(), db.DB)
	require.NoError(t, err)
	_, err = migrate.Up(t.Context(), db.DB, fstest.MapFS{"00001_orders_inventory.sql": {Data: old}}, shop.VersionTable)
	require.NoError(t, err)
	for _, q := range []string{
		`INSERT INTO orders (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at) VALUES
		   ('o1', 'sku-a', 2, 100, 'CREATED', 1, NOW(6), NOW(6)), ('o2', 'sku-a', 3, 100, 'CREATED', 1, NOW(6), NOW(6))`,
		`INSERT INTO inventory_change (change_id, sku_id, order_no, quantity, created_at) VALUES
		   ('reserve:o1', 'sku-a', 'o1', -2, NOW(6)), ('reserve:o2', 'sku-a', 'o2', -3, NOW(6))`,
		`INSERT INTO processed_event (consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status) VALUES
		   ('old-cg', 'o1-created', 'OrderCreated', 'o1', 'T', 'm1', NOW(6), 'SUCCESS'),
		   ('old-cg', 'o2-created', 'OrderCreated', 'o2', 'T', 'm2', NOW(6), 'SUCCESS')`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}
	require.NoError(t, shop.Migrate(t.Context(), db.DB))
	s, err := shop.New()
	require.NoError(t, err)

	rep, err := s.CancelUnpaid(t.Context(), db, []string{"o1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"o1"}, rep.Cancelled)
	var onHand int64
	require.NoError(t, db.Get(&onHand, `SELECT on_hand FROM inventory WHERE sku_id = 'sku-a'`))
	assert.Equal(t, int64(-3), onHand, "backfilled -5, o1's 2 released")

	r, err := shop.Reconcile(t.Context(), db, shop.ReconcileScope{Group: "old-cg"})
	require.NoError(t, err)
	assert.Equal(t, "reconcile: ok accounts=0 skus=1", r.Verdict(), "%v", lines(r))
}
