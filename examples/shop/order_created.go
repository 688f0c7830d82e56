package shop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

// ErrInjected is the transient failure a FailOnce event produces on its first attempt.
var ErrInjected = errors.New("shop: injected transient failure (failOnce)")

// OrderCreated creates the order (WAIT_PAY, version 1) and reserves its stock in tx: the inventory_change
// row ReserveChangeID (−quantity) is recorded as a business action, and the stock on hand drops only when
// that action was new (dedup.ActionApplied). A 1062 on the orders table is returned as an error (a retry:
// the Version middleware then finds the order at version 1 and acknowledges the event as stale); an event
// whose version is not 1 is a permanent error (an order starts at version 1).
//
// e is the event's body, decoded by Handle (dedup.Typed with consumer.JSON); its fields are checked first,
// and invalid ones are a permanent error listing the problems (the DLQ at once).
func (s *Shop) OrderCreated(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderCreated) (consumer.Outcome, error) {
	if err := e.check(); err != nil {
		return consumer.Outcome{}, err
	}
	if e.FailOnce && d.Attempt == 0 {
		return consumer.Outcome{}, retry.Transient(ErrInjected)
	}
	if v := eventVersion(d, VersionCreated); v != VersionCreated {
		return consumer.Outcome{}, retry.Permanentf("shop: OrderCreated of order %s carries version %d; an order starts at version %d",
			e.OrderNo, v, VersionCreated)
	}
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO orders (order_no, account_id, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.OrderNo, e.AccountID, e.SkuID, e.Quantity, e.AmountCents, StatusWaitPay, VersionCreated, now, now); err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: insert order %s: %w", e.OrderNo, err)
	}
	res, err := s.changes.Record(ctx, tx, ReserveChangeID(e.OrderNo), map[string]any{
		"sku_id": e.SkuID, "order_no": e.OrderNo, "quantity": -e.Quantity, "created_at": now})
	if err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: reserve stock for order %s: %w", e.OrderNo, err)
	}
	if res == dedup.ActionApplied {
		if err := adjustStock(ctx, tx, e.SkuID, -int64(e.Quantity), now); err != nil {
			return consumer.Outcome{}, fmt.Errorf("shop: reserve stock for order %s: %w", e.OrderNo, err)
		}
	}
	return consumer.Processed(), nil
}
