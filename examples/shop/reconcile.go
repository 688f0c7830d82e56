package shop

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// ReconcileScope selects what Reconcile checks.
type ReconcileScope struct {
	// Group is the consumer group (dedup scope) whose processed_event rows are checked against the
	// effects; "" skips that check.
	Group string
	// Prefix limits every check to account IDs, SKU IDs, order numbers and event IDs starting with it
	// (a demo run's ID); "" checks the whole database.
	Prefix string
}

// Difference is one thing that does not reconcile.
type Difference struct {
	// Subject names the row: "account a-1", "sku s-1", "order o-1", "event e-1".
	Subject string
	// Problem says what is wrong, with the figures.
	Problem string
}

// String renders the difference as one line: "<subject>: <problem>".
func (d Difference) String() string { return d.Subject + ": " + d.Problem }

// ReconcileReport is what Reconcile found.
type ReconcileReport struct {
	// Accounts and Skus are the account and inventory rows checked.
	Accounts, Skus int
	// Differences lists every problem found, in check order; empty when the domain reconciles.
	Differences []Difference
}

// OK reports whether nothing differed.
func (r ReconcileReport) OK() bool { return len(r.Differences) == 0 }

// Verdict is the report's last line: "reconcile: ok accounts=N skus=M" or "reconcile: FAILED n differences".
func (r ReconcileReport) Verdict() string {
	if r.OK() {
		return fmt.Sprintf("reconcile: ok accounts=%d skus=%d", r.Accounts, r.Skus)
	}
	return fmt.Sprintf("reconcile: FAILED %d differences", len(r.Differences))
}

// Reconcile checks the domain's invariants in db, after the fact, because a bug or a hand-made fix can break
// what the unique keys protect:
//
//   - per account, SUM(account_transaction.amount) = account.balance (and no transactions without account);
//   - per SKU, inventory.on_hand = SUM(inventory_change.quantity) (and no changes without inventory row);
//   - per order, exactly one reservation (an inventory_change of the order with quantity < 0) of −quantity;
//     exactly one release (> 0) when CANCELLED, none otherwise; a PAID order has exactly one PAYMENT
//     transaction, of −amount_cents, and a PAYMENT transaction belongs to a PAID order;
//   - per loyalty account, points = SUM(loyalty_credit.points);
//   - per SUCCESS processed_event row of scope.Group: OrderCreated → its order exists; OrderPaid → the order
//     is PAID; OrderCancelled → the order is CANCELLED; PaymentCaptured → an account_transaction carries its
//     event ID or, for a payment re-sent under a new event ID, is linked to it (account_transaction_event).
//
// A non-empty scope.Prefix that matches no account, SKU and order is itself a difference (a mistyped run ID
// must not pass as "ok accounts=0 skus=0"). It reads only, in plain statements (a consistent picture needs
// the writers stopped or drained). The error is a failed query; differences are in the report.
func Reconcile(ctx context.Context, db *sqlx.DB, scope ReconcileScope) (ReconcileReport, error) {
	like := escapeLike(scope.Prefix) + "%"
	var r ReconcileReport
	if err := db.GetContext(ctx, &r.Accounts, `SELECT COUNT(*) FROM account WHERE account_id LIKE ?`, like); err != nil {
		return r, fmt.Errorf("shop: reconcile: count accounts: %w", err)
	}
	if err := db.GetContext(ctx, &r.Skus, `SELECT COUNT(*) FROM inventory WHERE sku_id LIKE ?`, like); err != nil {
		return r, fmt.Errorf("shop: reconcile: count skus: %w", err)
	}
	if scope.Prefix != "" && r.Accounts == 0 && r.Skus == 0 {
		var orders int
		if err := db.GetContext(ctx, &orders, `SELECT COUNT(*) FROM orders WHERE order_no LIKE ?`, like); err != nil {
			return r, fmt.Errorf("shop: reconcile: count orders: %w", err)
		}
		if orders == 0 {
			r.Differences = append(r.Differences, Difference{"prefix " + scope.Prefix, "matches no account, SKU or order: nothing to reconcile"})
			return r, nil
		}
	}
	checks := []func(context.Context, *sqlx.DB, string) ([]Difference, error){
		accountBalances, orphanTransactions, stockOnHand, orphanChanges, orderChanges, paidOrders, paymentsOfUnpaidOrders,
		loyaltyPoints,
	}
	if scope.Group != "" {
		checks = append(checks, func(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
			return dedupRows(ctx, db, scope.Group, like)
		})
	}
	for _, check := range checks {
		diffs, err := check(ctx, db, like)
		if err != nil {
			return r, fmt.Errorf("shop: reconcile: %w", err)
		}
		r.Differences = append(r.Differences, diffs...)
	}
	return r, nil
}
