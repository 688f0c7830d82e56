package shop

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

// PaymentCaptured debits the customer's account in tx: the account_transaction PayTransactionID(paymentId)
// with amount −amountCents (kind PAYMENT, the event ID recorded) is a business action, and the account's
// balance moves by the same amount only when that action was new. The account aggregate has no version.
// When the payment was already recorded under another event ID (a business re-send with a new ID) the
// outcome is consumer.Duplicate: the balance does not move, the event is linked to the payment in
// account_transaction_event (for Reconcile) and its dedup row commits. An account that
// does not exist (yet) is a transient error: retried, then dead-lettered as exhausted.
//
// e is the event's body, decoded by Handle (dedup.Typed with consumer.JSON); its fields are checked first,
// and invalid ones are a permanent error listing the problems (the DLQ at once).
func (s *Shop) PaymentCaptured(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e PaymentCaptured) (consumer.Outcome, error) {
	if err := e.check(); err != nil {
		return consumer.Outcome{}, err
	}
	now := time.Now().UTC()
	res, err := s.transactions.Record(ctx, tx, PayTransactionID(e.PaymentID), map[string]any{
		"account_id": e.AccountID, "order_no": e.OrderNo, "amount": -e.AmountCents, "kind": KindPayment,
		"event_id": d.EventID, "created_at": now})
	if err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: record payment %s: %w", e.PaymentID, err)
	}
	if res == dedup.ActionAlreadyApplied {
		return s.linkPayment(ctx, tx, d.EventID, e.PaymentID, now)
	}
	r, err := tx.ExecContext(ctx, `UPDATE account SET balance = balance + ?, updated_at = ? WHERE account_id = ?`,
		-e.AmountCents, now, e.AccountID)
	if err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: debit account %s: %w", e.AccountID, err)
	}
	// The balance always changes (amountCents > 0), so 0 rows means no such account.
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return consumer.Outcome{}, retry.Transient(fmt.Errorf("shop: debit account %s for payment %s: the account does not exist (%d rows, %v)",
			e.AccountID, e.PaymentID, n, err))
	}
	return consumer.Processed(), nil
}

// linkPayment records that eventID names the payment already recorded as PayTransactionID(paymentID), and
// returns consumer.Duplicate. A link that exists (the same event in another dedup scope) is kept.
func (s *Shop) linkPayment(ctx context.Context, tx *sqlx.Tx, eventID, paymentID string, now time.Time) (consumer.Outcome, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO account_transaction_event (event_id, transaction_id, created_at) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE transaction_id = transaction_id`, eventID, PayTransactionID(paymentID), now); err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: link event %s to payment %s: %w", eventID, paymentID, err)
	}
	return consumer.Duplicate(), nil
}
