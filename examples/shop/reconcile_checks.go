package shop

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// resultSuccess is the result_status of a processed_event row whose event's effect committed (the dedup
// schema; a stale event's row holds "STALE").
const resultSuccess = "SUCCESS"

// Each check below runs one query for the rows that do not reconcile and turns each into a Difference.

// accountBalances: balance ≠ SUM(amount) of the account's transactions.
func accountBalances(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		ID      string `db:"account_id"`
		Balance int64  `db:"balance"`
		Sum     int64  `db:"total"`
		N       int    `db:"n"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT a.account_id, a.balance, COALESCE(SUM(t.amount), 0) AS total, COUNT(t.transaction_id) AS n
		FROM account a LEFT JOIN account_transaction t ON t.account_id = a.account_id
		WHERE a.account_id LIKE ? GROUP BY a.account_id, a.balance HAVING a.balance <> total ORDER BY a.account_id`, like)
	if err != nil {
		return nil, fmt.Errorf("account balances: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"account " + r.ID,
			fmt.Sprintf("balance %d ≠ sum of its %d transactions %d (off by %d)", r.Balance, r.N, r.Sum, r.Balance-r.Sum)})
	}
	return diffs, nil
}

// orphanTransactions: transactions of an account that has no account row.
func orphanTransactions(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		ID  string `db:"account_id"`
		Sum int64  `db:"total"`
		N   int    `db:"n"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT t.account_id, SUM(t.amount) AS total, COUNT(*) AS n
		FROM account_transaction t LEFT JOIN account a ON a.account_id = t.account_id
		WHERE t.account_id LIKE ? AND a.account_id IS NULL GROUP BY t.account_id ORDER BY t.account_id`, like)
	if err != nil {
		return nil, fmt.Errorf("transactions without account: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"account " + r.ID, fmt.Sprintf("no account row, but %d transactions summing to %d", r.N, r.Sum)})
	}
	return diffs, nil
}

// stockOnHand: on_hand ≠ SUM(quantity) of the SKU's inventory changes.
func stockOnHand(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		ID     string `db:"sku_id"`
		OnHand int64  `db:"on_hand"`
		Sum    int64  `db:"total"`
		N      int    `db:"n"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT i.sku_id, i.on_hand, COALESCE(SUM(c.quantity), 0) AS total, COUNT(c.change_id) AS n
		FROM inventory i LEFT JOIN inventory_change c ON c.sku_id = i.sku_id
		WHERE i.sku_id LIKE ? GROUP BY i.sku_id, i.on_hand HAVING i.on_hand <> total ORDER BY i.sku_id`, like)
	if err != nil {
		return nil, fmt.Errorf("stock on hand: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"sku " + r.ID,
			fmt.Sprintf("on hand %d ≠ sum of its %d changes %d (off by %d)", r.OnHand, r.N, r.Sum, r.OnHand-r.Sum)})
	}
	return diffs, nil
}

// orphanChanges: inventory changes of a SKU that has no inventory row.
func orphanChanges(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		ID  string `db:"sku_id"`
		Sum int64  `db:"total"`
		N   int    `db:"n"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT c.sku_id, SUM(c.quantity) AS total, COUNT(*) AS n
		FROM inventory_change c LEFT JOIN inventory i ON i.sku_id = c.sku_id
		WHERE c.sku_id LIKE ? AND i.sku_id IS NULL GROUP BY c.sku_id ORDER BY c.sku_id`, like)
	if err != nil {
		return nil, fmt.Errorf("changes without inventory: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"sku " + r.ID, fmt.Sprintf("no inventory row, but %d changes summing to %d", r.N, r.Sum)})
	}
	return diffs, nil
}

// orderChanges: an order without exactly one reservation of −quantity, or with a release count that does
// not match its status (one when CANCELLED, none otherwise).
func orderChanges(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		No        string `db:"order_no"`
		Status    string `db:"status"`
		Quantity  int64  `db:"quantity"`
		Reserves  int    `db:"reserves"`
		Reserved  int64  `db:"reserved"`
		Releases  int    `db:"releases"`
		Cancelled int    `db:"cancelled"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT o.order_no, o.status, o.quantity,
		       COALESCE(SUM(c.quantity < 0), 0) AS reserves, COALESCE(SUM(IF(c.quantity < 0, c.quantity, 0)), 0) AS reserved,
		       COALESCE(SUM(c.quantity > 0), 0) AS releases, o.status = ? AS cancelled
		FROM orders o LEFT JOIN inventory_change c ON c.order_no = o.order_no
		WHERE o.order_no LIKE ? GROUP BY o.order_no, o.status, o.quantity
		HAVING reserves <> 1 OR reserved <> -o.quantity OR releases <> cancelled ORDER BY o.order_no`, StatusCancelled, like)
	if err != nil {
		return nil, fmt.Errorf("order reservations and releases: %w", err)
	}
	var diffs []Difference
	for _, r := range rows {
		if r.Reserves != 1 || r.Reserved != -r.Quantity {
			diffs = append(diffs, Difference{"order " + r.No,
				fmt.Sprintf("%d reservations of %d units in all, want 1 of %d", r.Reserves, -r.Reserved, r.Quantity)})
		}
		if r.Releases != r.Cancelled {
			diffs = append(diffs, Difference{"order " + r.No, fmt.Sprintf("%s with %d releases, want %d", r.Status, r.Releases, r.Cancelled)})
		}
	}
	return diffs, nil
}

// paidOrders: a PAID order without exactly one PAYMENT transaction of −amount_cents.
func paidOrders(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		No     string `db:"order_no"`
		Amount int64  `db:"amount_cents"`
		N      int    `db:"n"`
		Sum    int64  `db:"total"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT o.order_no, o.amount_cents, COUNT(t.transaction_id) AS n, COALESCE(SUM(t.amount), 0) AS total
		FROM orders o LEFT JOIN account_transaction t ON t.order_no = o.order_no AND t.kind = ?
		WHERE o.order_no LIKE ? AND o.status = ? GROUP BY o.order_no, o.amount_cents
		HAVING n <> 1 OR total <> -o.amount_cents ORDER BY o.order_no`, KindPayment, like, StatusPaid)
	if err != nil {
		return nil, fmt.Errorf("paid orders: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"order " + r.No,
			fmt.Sprintf("PAID with %d payments of %d in all, want 1 of %d", r.N, r.Sum, -r.Amount)})
	}
	return diffs, nil
}

// paymentsOfUnpaidOrders: a PAYMENT transaction whose order is not PAID (or does not exist): money taken
// for an order whose OrderPaid never applied, e.g. dead-lettered as a version gap.
func paymentsOfUnpaidOrders(ctx context.Context, db *sqlx.DB, like string) ([]Difference, error) {
	var rows []struct {
		ID     string  `db:"transaction_id"`
		No     string  `db:"order_no"`
		Status *string `db:"status"`
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT t.transaction_id, t.order_no, o.status
		FROM account_transaction t LEFT JOIN orders o ON o.order_no = t.order_no
		WHERE t.kind = ? AND t.order_no LIKE ? AND (o.status IS NULL OR o.status <> ?) ORDER BY t.transaction_id`,
		KindPayment, like, StatusPaid)
	if err != nil {
		return nil, fmt.Errorf("payments of unpaid orders: %w", err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		status := "does not exist"
		if r.Status != nil {
			status = "is " + *r.Status
		}
		diffs = append(diffs, Difference{"order " + r.No, fmt.Sprintf("payment %s recorded, but the order %s", r.ID, status)})
	}
	return diffs, nil
}

// dedupRows: a SUCCESS processed_event row of group whose event's effect is missing. A PaymentCaptured's
// payment carries its event ID, or (a re-send under a new event ID) is linked to it in
// account_transaction_event.
func dedupRows(ctx context.Context, db *sqlx.DB, group, like string) ([]Difference, error) {
	var rows []struct {
		EventID   string `db:"event_id"`
		EventType string `db:"event_type"`
		Aggregate string `db:"aggregate_id"`
		Status    *string
	}
	err := db.SelectContext(ctx, &rows, `
		SELECT p.event_id, p.event_type, p.aggregate_id, o.status
		FROM processed_event p LEFT JOIN orders o ON o.order_no = p.aggregate_id
		WHERE p.consumer_group = ? AND p.event_id LIKE ? AND p.result_status = ?
		  AND ((p.event_type = ? AND o.order_no IS NULL)
		    OR (p.event_type = ? AND NOT (o.status <=> ?))
		    OR (p.event_type = ? AND NOT (o.status <=> ?))
		    OR (p.event_type = ? AND NOT EXISTS (SELECT 1 FROM account_transaction t WHERE t.event_id = p.event_id)
		        AND NOT EXISTS (SELECT 1 FROM account_transaction_event l JOIN account_transaction t ON t.transaction_id = l.transaction_id
		                        WHERE l.event_id = p.event_id)))
		ORDER BY p.event_id`,
		group, like, resultSuccess, EventOrderCreated, EventOrderPaid, StatusPaid, EventOrderCancelled, StatusCancelled,
		EventPaymentCaptured)
	if err != nil {
		return nil, fmt.Errorf("dedup rows of group %s: %w", group, err)
	}
	diffs := make([]Difference, 0, len(rows))
	for _, r := range rows {
		diffs = append(diffs, Difference{"event " + r.EventID, dedupProblem(r.EventType, r.Aggregate, r.Status)})
	}
	return diffs, nil
}

// dedupProblem says what a processed SUCCESS event of eventType is missing.
func dedupProblem(eventType, aggregate string, status *string) string {
	switch eventType {
	case EventPaymentCaptured:
		return "PaymentCaptured processed, but no account transaction carries its event ID or is linked to it"
	case EventOrderCreated:
		return fmt.Sprintf("OrderCreated processed, but order %q does not exist", aggregate)
	}
	got := "no order"
	if status != nil {
		got = "status " + *status
	}
	return fmt.Sprintf("%s processed, but order %q has %s", eventType, aggregate, got)
}
