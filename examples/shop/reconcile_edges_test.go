package shop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// A payment re-sent under a new event ID (a business re-send) is a duplicate that commits its dedup row
// as SUCCESS: reconcile must accept it, since the payment it names exists (recorded by the first event).
func TestReconcile_PaymentResentUnderNewEventIDReconciles(t *testing.T) {
	w := cleanDomain(t)
	h := w.chain(3)
	require.Equal(t, consumer.KindDuplicate, w.through(h, w.captured("pay1", "captured-resent", 250)).Kind)

	r := w.reconcile()

	assert.Empty(t, lines(r))
	assert.Equal(t, "reconcile: ok accounts=1 skus=1", r.Verdict())
	assert.Equal(t, int64(10_000-250), w.balance(), "debited once")
	assert.Equal(t, int64(1), w.int(`SELECT COUNT(*) FROM account_transaction_event WHERE event_id = ? AND transaction_id = ?`,
		w.name("captured-resent"), shop.PayTransactionID(w.name("pay1"))))
}

// The payment check still fails when a SUCCESS PaymentCaptured names a payment nobody recorded.
func TestReconcile_PaymentEventWithoutTransaction(t *testing.T) {
	w := cleanDomain(t)
	h := w.chain(3)
	require.Equal(t, consumer.KindDuplicate, w.through(h, w.captured("pay1", "captured-resent", 250)).Kind)
	w.exec(`DELETE FROM account_transaction WHERE transaction_id = ?`, shop.PayTransactionID(w.name("pay1")))
	w.exec(`UPDATE account SET balance = balance + 250 WHERE account_id = ?`, w.name("acct"))

	r := w.reconcile()

	assert.ElementsMatch(t, []string{
		"order " + w.name("o1") + ": PAID with 0 payments of 0 in all, want 1 of -250",
		"event " + w.name("captured") + ": PaymentCaptured processed, but no account transaction carries its event ID or is linked to it",
		"event " + w.name("captured-resent") + ": PaymentCaptured processed, but no account transaction carries its event ID or is linked to it",
	}, lines(r))
}

// The checks the merged tests did not make fail: orphan transactions and changes, an OrderCreated and an
// OrderCancelled whose effect is gone; each with its exact line.
func TestReconcile_EveryCheckCanFail(t *testing.T) {
	w := cleanDomain(t)
	w.exec(`INSERT INTO account_transaction (transaction_id, account_id, amount, kind, created_at) VALUES (?, ?, 5, 'OPENING', NOW(6))`,
		w.name("t-orphan"), w.name("ghost-acct"))
	w.exec(`INSERT INTO inventory_change (change_id, sku_id, order_no, quantity, created_at) VALUES (?, ?, '', 4, NOW(6))`,
		w.name("c-orphan"), w.name("ghost-sku"))
	w.exec(`UPDATE orders SET status = ? WHERE order_no = ?`, shop.StatusWaitPay, w.name("o2"))
	w.exec(`DELETE FROM orders WHERE order_no = ?`, w.name("o3"))

	r := w.reconcile()

	assert.ElementsMatch(t, []string{
		"account " + w.name("ghost-acct") + ": no account row, but 1 transactions summing to 5",
		"sku " + w.name("ghost-sku") + ": no inventory row, but 1 changes summing to 4",
		"order " + w.name("o2") + ": WAIT_PAY with 1 releases, want 0",
		"event " + w.name("cancelled") + `: OrderCancelled processed, but order "` + w.name("o2") + `" has status WAIT_PAY`,
		"event " + w.name("o3") + `-created: OrderCreated processed, but order "` + w.name("o3") + `" does not exist`,
	}, lines(r))
}

// --prefix is a literal prefix: "_" and "%" in it match only themselves, so another run whose name
// differs in that place is not checked.
func TestReconcile_PrefixIsLiteralInLike(t *testing.T) {
	w := newWorld(t)
	base := testenv.Unique("lk")
	mine, other := base+"_%1-", base+"xy1-"
	require.NoError(t, w.shop.Apply(w.ctx, w.db, shop.Seed{Run: mine,
		Stock: map[string]int64{mine + "sku": 5}, Accounts: map[string]int64{mine + "acct": 7}}))
	require.NoError(t, w.shop.Apply(w.ctx, w.db, shop.Seed{Run: other,
		Stock: map[string]int64{other + "sku": 5}, Accounts: map[string]int64{other + "acct": 7}}))
	w.exec(`UPDATE account SET balance = 0 WHERE account_id = ?`, other+"acct")

	r, err := shop.Reconcile(w.ctx, w.db, shop.ReconcileScope{Prefix: mine})
	require.NoError(t, err)
	assert.Equal(t, "reconcile: ok accounts=1 skus=1", r.Verdict(), "%v", lines(r))

	r, err = shop.Reconcile(w.ctx, w.db, shop.ReconcileScope{Prefix: other})
	require.NoError(t, err)
	assert.Equal(t, []string{"account " + other + "acct: balance 0 ≠ sum of its 1 transactions 7 (off by -7)"}, lines(r))
}

// OrderCancelled before its OrderCreated is a version gap: retried (nothing written), and applied with its
// release once the order exists; an OrderPaid after the cancellation is stale and debits nothing.
func TestDomain_OrderCancelledBeforeOrderCreatedThenOrderPaid(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	early := w.cancelled("o1", "cancelled", 2)

	require.Equal(t, consumer.KindRetry, w.through(h, early).Kind)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o1", 3)).Kind)
	early.Attempt = 1
	require.Equal(t, consumer.KindProcessed, w.through(h, early).Kind)
	assert.Equal(t, consumer.KindStale, w.through(h, w.paid("o1", "paid", 2)).Kind)

	status, version := w.order("o1")
	assert.Equal(t, shop.StatusCancelled, status)
	assert.Equal(t, int64(2), version)
	assert.Equal(t, int64(100), w.onHand())
	r := w.reconcile()
	assert.True(t, r.OK(), "%v", lines(r))
}

// A payment whose order is not PAID (its OrderPaid never applied) is a difference.
func TestReconcile_PaymentOfAnUnpaidOrder(t *testing.T) {
	w := cleanDomain(t)
	w.exec(`UPDATE orders SET status = ?, version = 1 WHERE order_no = ?`, shop.StatusWaitPay, w.name("o1"))

	r := w.reconcile()

	assert.Contains(t, lines(r), "order "+w.name("o1")+": payment "+shop.PayTransactionID(w.name("pay1"))+
		" recorded, but the order is WAIT_PAY")
	assert.False(t, r.OK())
}

// A prefix that matches nothing fails instead of reporting "ok accounts=0 skus=0".
func TestReconcile_PrefixMatchingNothingFails(t *testing.T) {
	w := newWorld(t)
	prefix := testenv.Unique("nothing") + "-"

	r, err := shop.Reconcile(w.ctx, w.db, shop.ReconcileScope{Prefix: prefix})
	require.NoError(t, err)

	assert.Equal(t, []string{"prefix " + prefix + ": matches no account, SKU or order: nothing to reconcile"}, lines(r))
	assert.Equal(t, "reconcile: FAILED 1 differences", r.Verdict())
}
