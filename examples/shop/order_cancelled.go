package shop

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// OrderCancelled moves the order WAIT_PAY → CANCELLED at the event's version (2 without the Version
// middleware) and releases its stock, in tx; results map as in OrderPaid. It races the compensation job
// (CancelUnpaid), which cancels the same orders in transactions of its own: the conditional UPDATE lets
// one of them move the order, the other finds it stale; and the release is the business action
// ReleaseChangeID, so even two movers would give one release (S6).
//
// e is the event's body, decoded by Handle (dedup.Typed with consumer.JSON); its fields are checked first,
// and invalid ones are a permanent error listing the problems (the DLQ at once).
func (s *Shop) OrderCancelled(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderCancelled) (consumer.Outcome, error) {
	if err := e.check(); err != nil {
		return consumer.Outcome{}, err
	}
	v := eventVersion(d, VersionSettled)
	res, err := s.cancel(ctx, tx, e.OrderNo, v)
	if err != nil {
		return consumer.Outcome{}, err
	}
	return transitionOutcome(res, EventOrderCancelled, e.OrderNo, v), nil
}

// cancel moves orderNo to CANCELLED at version v and, when that applied, records the release of its stock
// (+quantity) and adds it back to the stock on hand when the release was new.
func (s *Shop) cancel(ctx context.Context, tx *sqlx.Tx, orderNo string, v int64) (dedup.TransitionResult, error) {
	now := time.Now().UTC()
	res, err := s.orders.Transition(ctx, tx, dedup.Transition{
		Key: orderNo, From: []string{StatusWaitPay, StatusCreated}, To: StatusCancelled, Version: v,
		Set: map[string]any{"updated_at": now},
	})
	if err != nil || res != dedup.TransitionApplied {
		if err != nil {
			err = fmt.Errorf("shop: cancel order %s: %w", orderNo, err)
		}
		return res, err
	}
	var o struct {
		SkuID    string `db:"sku_id"`
		Quantity int64  `db:"quantity"`
	}
	if err := tx.GetContext(ctx, &o, `SELECT sku_id, quantity FROM orders WHERE order_no = ?`, orderNo); err != nil {
		return 0, fmt.Errorf("shop: read cancelled order %s: %w", orderNo, err)
	}
	rel, err := s.changes.Record(ctx, tx, ReleaseChangeID(orderNo), map[string]any{
		"sku_id": o.SkuID, "order_no": orderNo, "quantity": o.Quantity, "created_at": now})
	if err != nil {
		return 0, fmt.Errorf("shop: release stock of order %s: %w", orderNo, err)
	}
	if rel == dedup.ActionApplied {
		if err := adjustStock(ctx, tx, o.SkuID, o.Quantity, now); err != nil {
			return 0, fmt.Errorf("shop: release stock of order %s: %w", orderNo, err)
		}
	}
	return res, nil
}
