package shop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
)

// recordedFollowUps is a shop.FollowUps that remembers the orders it was given and fails with err.
type recordedFollowUps struct {
	paid []shop.PaidOrder
	err  error
}

func (r *recordedFollowUps) OrderPaid(_ context.Context, _ *consumer.Delivery, p shop.PaidOrder) error {
	r.paid = append(r.paid, p)
	return r.err
}

// The follow-ups of a payment (a loyalty message, a notification) are recorded once, by the delivery that
// pays the order, with its account and amount; a late OrderPaid (stale) records none.
func TestOrderPaid_FollowUpsRecordedOnlyByTheDeliveryThatPays(t *testing.T) {
	f := &recordedFollowUps{}
	w := newWorld(t, shop.WithFollowUps(f))
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	w.mustHandle(w.paid("o1", "o1-paid", 2), consumer.KindProcessed)
	w.mustHandle(w.paid("o1", "o1-paid-late", 2), consumer.KindStale)

	require.Len(t, f.paid, 1)
	assert.Equal(t, shop.PaidOrder{OrderNo: w.name("o1"), AccountID: w.name("acct"), PaymentID: w.name("o1") + "-pay", AmountCents: 250}, f.paid[0])
}

// A follow-up that cannot be recorded takes the payment with it: both or neither.
func TestOrderPaid_FollowUpFailureRollsThePaymentBack(t *testing.T) {
	f := &recordedFollowUps{err: errors.New("outbox down")}
	w := newWorld(t, shop.WithFollowUps(f))
	w.seed()
	w.mustHandle(w.created("o1", 3), consumer.KindProcessed)

	_, err := w.handle(w.paid("o1", "o1-paid", 2))

	require.ErrorIs(t, err, f.err)
	status, _ := w.order("o1")
	assert.Equal(t, shop.StatusWaitPay, status)
}

func (w *world) credited(order, eventID string, points int64) *consumer.Delivery {
	return w.delivery(shop.EventLoyaltyPointsCredited, w.name(eventID), w.name("acct"), 0,
		shop.LoyaltyPointsCredited{OrderNo: w.name(order), AccountID: w.name("acct"), Points: points})
}

// An order's points are credited once: the same credit under another event ID (a re-sent follow-up) is a
// duplicate that changes nothing; reconciliation finds the points equal to the credits.
func TestLoyaltyPointsCredited_CreditsAnOrderOnce(t *testing.T) {
	w := newWorld(t)
	w.seed()

	w.mustHandle(w.credited("o1", "g/o1-paid/loyalty", 250), consumer.KindProcessed)
	w.mustHandle(w.credited("o2", "g/o2-paid/loyalty", 100), consumer.KindProcessed)
	w.mustHandle(w.credited("o1", "g/o1-paid-again/loyalty", 250), consumer.KindDuplicate)

	l, err := shop.RunLoyalty(w.ctx, w.db, w.prefix)
	require.NoError(t, err)
	assert.Equal(t, 2, l.Credits)
	assert.Equal(t, map[string]int64{w.name("acct"): 350}, l.Points)
	assert.Equal(t, w.name("g/o1-paid/loyalty"), w.str(`SELECT event_id FROM loyalty_credit WHERE credit_id = ?`, shop.LoyaltyCreditID(w.name("o1"))))
	rec, err := shop.Reconcile(w.ctx, w.db, shop.ReconcileScope{Prefix: w.prefix})
	require.NoError(t, err)
	assert.Empty(t, rec.Differences)
}

// Points that do not add up to the account's credits (a credit applied twice, a hand-made fix) are a
// reconciliation difference.
func TestReconcile_LoyaltyPointsOtherThanTheCreditsDiffer(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.credited("o1", "o1-loyalty", 250), consumer.KindProcessed)
	_, err := w.db.Exec(`UPDATE loyalty_account SET points = points + 250 WHERE account_id = ?`, w.name("acct"))
	require.NoError(t, err)

	rec, err := shop.Reconcile(w.ctx, w.db, shop.ReconcileScope{Prefix: w.prefix})

	require.NoError(t, err)
	assert.Contains(t, rec.Differences, shop.Difference{Subject: "loyalty account " + w.name("acct"), Problem: "points 500 ≠ sum of its 1 credits 250"})
}

func TestLoyaltyPointsCredited_NonPositivePointsArePermanent(t *testing.T) {
	w := newWorld(t)

	_, err := w.handle(w.credited("o1", "o1-loyalty", 0))

	assert.ErrorContains(t, err, "points must be > 0")
}

func (w *world) str(query string, args ...any) string {
	w.t.Helper()
	var s string
	require.NoError(w.t, w.db.Get(&s, query, args...))
	return s
}
