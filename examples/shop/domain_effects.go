package shop

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// DomainEffects are the business rows of one demo run (everything named with its prefix).
type DomainEffects struct {
	// Orders counts orders; ByStatus counts them per status.
	Orders   int
	ByStatus map[string]int
	// Reservations and Releases count the orders' inventory changes (quantity < 0 and > 0).
	Reservations, Releases int
	// Payments counts PAYMENT account transactions.
	Payments int
	// OnHand is the stock per SKU and Balances the balance per account.
	OnHand, Balances map[string]int64
}

// Effects of an event type: OrderCreated → an order; OrderPaid → a PAID order; PaymentCaptured → a
// PAYMENT transaction; OrderCancelled → a CANCELLED order (whoever cancelled it).
func (e DomainEffects) Effects() map[string]int {
	return map[string]int{
		EventOrderCreated: e.Orders, EventOrderPaid: e.ByStatus[StatusPaid],
		EventPaymentCaptured: e.Payments, EventOrderCancelled: e.ByStatus[StatusCancelled],
	}
}

// RunEffects reads the effects of the rows whose keys start with prefix. Errors name the failed query.
func RunEffects(ctx context.Context, db *sqlx.DB, prefix string) (DomainEffects, error) {
	like := escapeLike(prefix) + "%"
	e := DomainEffects{ByStatus: map[string]int{}, OnHand: map[string]int64{}, Balances: map[string]int64{}}
	var statuses []struct {
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	if err := db.SelectContext(ctx, &statuses, `SELECT status, COUNT(*) AS n FROM orders WHERE order_no LIKE ? GROUP BY status`, like); err != nil {
		return e, fmt.Errorf("shop: run effects: orders: %w", err)
	}
	for _, s := range statuses {
		e.ByStatus[s.Status] = s.N
		e.Orders += s.N
	}
	if err := db.QueryRowxContext(ctx, `SELECT COALESCE(SUM(quantity < 0), 0), COALESCE(SUM(quantity > 0), 0)
		FROM inventory_change WHERE order_no LIKE ?`, like).Scan(&e.Reservations, &e.Releases); err != nil {
		return e, fmt.Errorf("shop: run effects: inventory changes: %w", err)
	}
	if err := db.GetContext(ctx, &e.Payments, `SELECT COUNT(*) FROM account_transaction WHERE order_no LIKE ? AND kind = ?`,
		like, KindPayment); err != nil {
		return e, fmt.Errorf("shop: run effects: payments: %w", err)
	}
	if err := amounts(ctx, db, e.OnHand, `SELECT sku_id, on_hand FROM inventory WHERE sku_id LIKE ?`, like); err != nil {
		return e, fmt.Errorf("shop: run effects: stock: %w", err)
	}
	if err := amounts(ctx, db, e.Balances, `SELECT account_id, balance FROM account WHERE account_id LIKE ?`, like); err != nil {
		return e, fmt.Errorf("shop: run effects: balances: %w", err)
	}
	return e, nil
}

// amounts fills into with the (key, amount) rows of query.
func amounts(ctx context.Context, db *sqlx.DB, into map[string]int64, query string, args ...any) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		into[k] = v
	}
	return rows.Err()
}

// RunDecisions counts group's processed_event rows of the events whose ID starts with prefix, per
// result_status ("SUCCESS", "STALE"): one row per decided event, whatever the
// counters of the consumer saw from other runs. Errors name the failed query.
func RunDecisions(ctx context.Context, db *sqlx.DB, group, prefix string) (map[string]int, error) {
	var rows []struct {
		Status string `db:"result_status"`
		N      int    `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT result_status, COUNT(*) AS n FROM processed_event
		WHERE consumer_group = ? AND event_id LIKE ? GROUP BY result_status`, group, escapeLike(prefix)+"%"); err != nil {
		return nil, fmt.Errorf("shop: run decisions of group %s: %w", group, err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}
