package shop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/retry"
)

func TestOrderCreated_CreatesTheOrderAndReservesItsStock(t *testing.T) {
	w := newWorld(t)
	w.seed()

	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	status, version := w.order("o1")
	assert.Equal(t, shop.StatusWaitPay, status)
	assert.Equal(t, int64(1), version)
	assert.Equal(t, int64(1), w.int(`SELECT COUNT(*) FROM orders WHERE order_no = ? AND account_id = ?`, w.name("o1"), w.name("acct")))
	assert.Equal(t, int64(-3), w.int(`SELECT quantity FROM inventory_change WHERE change_id = ?`, shop.ReserveChangeID(w.name("o1"))))
	assert.Equal(t, int64(97), w.onHand())
}

// The reservation is a business action: when its change_id is already there, the stock does not move again.
func TestOrderCreated_ReservationAlreadyRecordedMovesNoStock(t *testing.T) {
	w := newWorld(t)
	w.seed()
	_, err := w.db.Exec(`INSERT INTO inventory_change (change_id, sku_id, order_no, quantity, created_at) VALUES (?, ?, ?, -3, NOW(6))`,
		shop.ReserveChangeID(w.name("o1")), w.name("sku"), w.name("o1"))
	require.NoError(t, err)

	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	assert.Equal(t, int64(100), w.onHand(), "the reservation was applied before; the stock is not reduced twice")
	assert.Equal(t, int64(1), w.int(`SELECT COUNT(*) FROM inventory_change WHERE order_no = ?`, w.name("o1")))
}

func TestOrderCreated_OrderThatExistsIsAnError(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	again := w.created("o1", 3)
	again.EventID = w.name("o1-created-again")
	_, err := w.handle(again)

	require.Error(t, err, "a 1062 on orders is the handler's error, retried (the Version middleware then finds it stale)")
	assert.Equal(t, int64(97), w.onHand())
}

func TestOrderCreated_VersionOtherThanOneIsPermanent(t *testing.T) {
	w := newWorld(t)
	d := w.created("o1", 3)
	d.Version = 2

	_, err := w.handle(d)

	require.Error(t, err)
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
}

func TestOrderPaid_AppliedMovesWaitPayToPaid(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	w.mustHandle(w.paid("o1", "paid", 2), consumer.KindProcessed)

	status, version := w.order("o1")
	assert.Equal(t, shop.StatusPaid, status)
	assert.Equal(t, int64(2), version)
}

func TestOrderPaid_StaleWritesNothing(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)
	w.mustHandle(w.cancelled("o1", "cancelled", 2), consumer.KindProcessed)

	o := w.mustHandle(w.paid("o1", "paid", 2), consumer.KindStale)

	assert.Contains(t, o.Reason, "already at or past the event's version")
	status, version := w.order("o1")
	assert.Equal(t, shop.StatusCancelled, status, "a cancelled order is not paid by a late event")
	assert.Equal(t, int64(2), version)
}

func TestOrderPaid_MissingOrderIsRetried(t *testing.T) {
	w := newWorld(t)

	o := w.mustHandle(w.paid("o1", "paid", 2), consumer.KindRetry)

	assert.Contains(t, o.Reason, "has not been applied yet")
	assert.Zero(t, w.int(`SELECT COUNT(*) FROM orders WHERE order_no = ?`, w.name("o1")))
}

func TestOrderPaid_AheadIsRetried(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	w.mustHandle(w.paid("o1", "paid", 3), consumer.KindRetry)

	status, version := w.order("o1")
	assert.Equal(t, shop.StatusWaitPay, status)
	assert.Equal(t, int64(1), version)
}

// An order at the version before the event's but in a status the event cannot move it from: dead-lettered
// with the reason, nothing written.
func TestOrderPaid_IllegalIsDeadLettered(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)
	w.mustHandle(w.cancelled("o1", "cancelled", 2), consumer.KindProcessed)

	o := w.mustHandle(w.paid("o1", "paid-v3", 3), consumer.KindDeadLetter)

	assert.Contains(t, o.Reason, "cannot move it from")
	status, version := w.order("o1")
	assert.Equal(t, shop.StatusCancelled, status)
	assert.Equal(t, int64(2), version)
}

// Orders written before migration 00002 are CREATED; they can be paid like WAIT_PAY ones.
func TestOrderPaid_LegacyCreatedOrderCanBePaid(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)
	_, err := w.db.Exec(`UPDATE orders SET status = ? WHERE order_no = ?`, shop.StatusCreated, w.name("o1"))
	require.NoError(t, err)

	w.mustHandle(w.paid("o1", "paid", 2), consumer.KindProcessed)

	status, _ := w.order("o1")
	assert.Equal(t, shop.StatusPaid, status)
}

func TestPaymentCaptured_DebitsTheAccountOnce(t *testing.T) {
	w := newWorld(t)
	w.seed()

	w.mustHandle(w.captured("pay1", "captured", 250), consumer.KindProcessed)
	// The same payment under a new event ID (a business re-send): recorded already, nothing moves.
	w.mustHandle(w.captured("pay1", "captured-again", 250), consumer.KindDuplicate)

	assert.Equal(t, int64(10_000-250), w.balance())
	var row struct {
		Amount  int64  `db:"amount"`
		Kind    string `db:"kind"`
		EventID string `db:"event_id"`
	}
	require.NoError(t, w.db.Get(&row, `SELECT amount, kind, event_id FROM account_transaction WHERE transaction_id = ?`,
		shop.PayTransactionID(w.name("pay1"))))
	assert.Equal(t, int64(-250), row.Amount, "a payment debits the account: a negative amount")
	assert.Equal(t, shop.KindPayment, row.Kind)
	assert.Equal(t, w.name("captured"), row.EventID)
}

func TestPaymentCaptured_UnknownAccountIsTransient(t *testing.T) {
	w := newWorld(t)

	_, err := w.handle(w.captured("pay1", "captured", 250))

	require.Error(t, err)
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
	assert.Zero(t, w.int(`SELECT COUNT(*) FROM account_transaction WHERE transaction_id = ?`, shop.PayTransactionID(w.name("pay1"))),
		"rolled back with the rest")
}

func TestOrderCancelled_CancelsAndReleasesTheStockOnce(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	w.mustHandle(w.cancelled("o1", "cancelled", 2), consumer.KindProcessed)
	w.mustHandle(w.cancelled("o1", "cancelled-again", 2), consumer.KindStale)

	status, version := w.order("o1")
	assert.Equal(t, shop.StatusCancelled, status)
	assert.Equal(t, int64(2), version)
	assert.Equal(t, int64(3), w.int(`SELECT quantity FROM inventory_change WHERE change_id = ?`, shop.ReleaseChangeID(w.name("o1"))))
	assert.Equal(t, int64(100), w.onHand(), "reserved 3, released 3")
}

func TestOrderCancelled_PaidOrderIsStale(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)
	w.mustHandle(w.paid("o1", "paid", 2), consumer.KindProcessed)

	w.mustHandle(w.cancelled("o1", "cancelled", 2), consumer.KindStale)

	assert.Equal(t, int64(97), w.onHand(), "nothing released")
	assert.Zero(t, w.int(`SELECT COUNT(*) FROM inventory_change WHERE change_id = ?`, shop.ReleaseChangeID(w.name("o1"))))
}

func TestOrderCancelled_MissingOrderIsRetried(t *testing.T) {
	w := newWorld(t)

	w.mustHandle(w.cancelled("o1", "cancelled", 2), consumer.KindRetry)
}

func TestHandle_UnknownEventTypeIsPermanent(t *testing.T) {
	w := newWorld(t)
	d := w.created("o1", 1)
	d.EventType = "OrderShipped"

	_, err := w.handle(d)

	require.Error(t, err)
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
}
