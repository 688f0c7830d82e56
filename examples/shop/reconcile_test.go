package shop_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/migrate"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// cleanDomain gives the world a domain that reconciles, written through the example's chain: o1 paid and
// its payment captured, o2 cancelled, o3 waiting for payment.
func cleanDomain(t *testing.T) *world {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	for _, d := range []*consumer.Delivery{w.created("o1", 3), w.created("o2", 2), w.created("o3", 1),
		w.paid("o1", "paid", 2), w.captured("pay1", "captured", 250), w.cancelled("o2", "cancelled", 2)} {
		require.Equal(t, consumer.KindProcessed, w.through(h, d).Kind, "%s", d.EventID)
	}
	return w
}

func (w *world) reconcile() shop.ReconcileReport {
	w.t.Helper()
	r, err := shop.Reconcile(w.ctx, w.db, shop.ReconcileScope{Group: w.group, Prefix: w.prefix})
	require.NoError(w.t, err)
	return r
}

func (w *world) exec(query string, args ...any) {
	w.t.Helper()
	_, err := w.db.Exec(query, args...)
	require.NoError(w.t, err)
}

func lines(r shop.ReconcileReport) []string {
	out := make([]string, 0, len(r.Differences))
	for _, d := range r.Differences {
		out = append(out, d.String())
	}
	return out
}

func TestReconcile_CleanDomainIsOK(t *testing.T) {
	w := cleanDomain(t)

	r := w.reconcile()

	assert.Empty(t, lines(r))
	assert.Equal(t, "reconcile: ok accounts=1 skus=1", r.Verdict())
}

func TestReconcile_CorruptedBalance(t *testing.T) {
	w := cleanDomain(t)
	w.exec(`UPDATE account SET balance = balance + 7 WHERE account_id = ?`, w.name("acct"))

	r := w.reconcile()

	assert.Equal(t, []string{"account " + w.name("acct") + ": balance 9757 ≠ sum of its 2 transactions 9750 (off by 7)"}, lines(r))
	assert.Equal(t, "reconcile: FAILED 1 differences", r.Verdict())
}

func TestReconcile_MissingReservation(t *testing.T) {
	w := cleanDomain(t)
	w.exec(`DELETE FROM inventory_change WHERE change_id = ?`, shop.ReserveChangeID(w.name("o3")))

	r := w.reconcile()

	assert.Equal(t, []string{
		"sku " + w.name("sku") + ": on hand 96 ≠ sum of its 4 changes 97 (off by -1)",
		"order " + w.name("o3") + ": 0 reservations of 0 units in all, want 1 of 1",
	}, lines(r))
	assert.False(t, r.OK())
}

func TestReconcile_ExtraRelease(t *testing.T) {
	w := cleanDomain(t)
	w.exec(`INSERT INTO inventory_change (change_id, sku_id, order_no, quantity, created_at) VALUES (?, ?, ?, 3, NOW(6))`,
		shop.ReleaseChangeID(w.name("o1")), w.name("sku"), w.name("o1"))

	r := w.reconcile()

	assert.Equal(t, []string{
		"sku " + w.name("sku") + ": on hand 96 ≠ sum of its 6 changes 99 (off by -3)",
		"order " + w.name("o1") + ": PAID with 1 releases, want 0",
	}, lines(r))
	assert.Equal(t, "reconcile: FAILED 2 differences", r.Verdict())
}

func TestReconcile_DedupRowsWithoutEffects(t *testing.T) {
	w := cleanDomain(t)
	// The paid order moved back by hand, and a payment's transaction lost with its balance fixed by hand.
	w.exec(`UPDATE orders SET status = ?, version = 1 WHERE order_no = ?`, shop.StatusWaitPay, w.name("o1"))
	w.exec(`DELETE FROM account_transaction WHERE transaction_id = ?`, shop.PayTransactionID(w.name("pay1")))
	w.exec(`UPDATE account SET balance = balance + 250 WHERE account_id = ?`, w.name("acct"))

	r := w.reconcile()

	assert.ElementsMatch(t, []string{
		"event " + w.name("paid") + `: OrderPaid processed, but order "` + w.name("o1") + `" has status WAIT_PAY`,
		"event " + w.name("captured") + ": PaymentCaptured processed, but no account transaction carries its event ID or is linked to it",
	}, lines(r))
}

func TestReconcile_PaidOrderWithoutPayment(t *testing.T) {
	w := cleanDomain(t)
	h := w.chain(3)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.paid("o3", "paid3", 2)).Kind)

	r := w.reconcile()

	assert.Equal(t, []string{"order " + w.name("o3") + ": PAID with 0 payments of 0 in all, want 1 of -250"}, lines(r))
}

// Migration 00002 on a database of the OrderCreated-only example: inventory is backfilled from the
// inventory_change sums, the old CREATED orders stay, and the whole database reconciles.
func TestMigration_BackfillsInventoryFromChanges(t *testing.T) {
	db := scratchDB(t)
	old, err := os.ReadFile("migrations/00001_orders_inventory.sql")
	require.NoError(t, err)
	_, err = dedup.Migrate(t.Context(), db.DB)
	require.NoError(t, err)
	_, err = migrate.Up(t.Context(), db.DB, fstest.MapFS{"00001_orders_inventory.sql": {Data: old}}, shop.VersionTable)
	require.NoError(t, err)
	for _, q := range []string{
		`INSERT INTO orders (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at) VALUES
		   ('o1', 'sku-a', 2, 100, 'CREATED', 1, NOW(6), NOW(6)), ('o2', 'sku-a', 3, 100, 'CREATED', 1, NOW(6), NOW(6)),
		   ('o3', 'sku-b', 1, 100, 'CREATED', 1, NOW(6), NOW(6))`,
		`INSERT INTO inventory_change (change_id, sku_id, order_no, quantity, created_at) VALUES
		   ('reserve:o1', 'sku-a', 'o1', -2, NOW(6)), ('reserve:o2', 'sku-a', 'o2', -3, NOW(6)), ('reserve:o3', 'sku-b', 'o3', -1, NOW(6))`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}

	require.NoError(t, shop.Migrate(t.Context(), db.DB))

	var stock []struct {
		Sku    string `db:"sku_id"`
		OnHand int64  `db:"on_hand"`
	}
	require.NoError(t, db.Select(&stock, `SELECT sku_id, on_hand FROM inventory ORDER BY sku_id`))
	assert.Equal(t, []struct {
		Sku    string `db:"sku_id"`
		OnHand int64  `db:"on_hand"`
	}{{"sku-a", -5}, {"sku-b", -1}}, stock)
	var created int
	require.NoError(t, db.Get(&created, `SELECT COUNT(*) FROM orders WHERE status = 'CREATED' AND account_id = ''`))
	assert.Equal(t, 3, created, "old orders keep their status")
	r, err := shop.Reconcile(t.Context(), db, shop.ReconcileScope{})
	require.NoError(t, err)
	assert.Equal(t, "reconcile: ok accounts=0 skus=2", r.Verdict(), "%v", lines(r))
}

// scratchDB creates a database of its own (rmqguard_scratch_…, which the test user may create and drop),
// opens it, and drops it when the test ends.
func scratchDB(t *testing.T) *sqlx.DB {
	t.Helper()
	base := shoptest.MySQL(t)
	name := strings.ReplaceAll(testenv.Unique("rmqguard_scratch"), "-", "_")
	_, err := base.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = base.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg, err := mysql.ParseDSN(testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	cfg.DBName = name
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
