package shop

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// OrderPaid moves the order WAIT_PAY → PAID at the event's version (Delivery.Version, 2 when the Version
// middleware did not run) with one conditional UPDATE, and maps the result:
//
//   - applied → consumer.Processed, and the follow-ups (WithFollowUps) recorded in the same transaction;
//   - stale (the order is already at that version or past it: paid, or cancelled by the compensation job)
//     → consumer.Stale, nothing written;
//   - ahead or missing (the order has not been created yet: the event overtook OrderCreated) →
//     consumer.Retry on the broker's schedule;
//   - illegal (the order is at the version before but in a status that cannot be paid) → consumer.DeadLetter
//     with the reason: no redelivery can make it legal, and an operator must look at it (a refund, say).
//
// Orders from before migration 00002 (status CREATED) can be paid like WAIT_PAY ones.
//
// e is the event's body, decoded by Handle (dedup.Typed with consumer.JSON); its fields are checked first,
// and invalid ones are a permanent error listing the problems (the DLQ at once).
func (s *Shop) OrderPaid(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderPaid) (consumer.Outcome, error) {
	if err := e.check(); err != nil {
		return consumer.Outcome{}, err
	}
	v := eventVersion(d, VersionSettled)
	res, err := s.orders.Transition(ctx, tx, dedup.Transition{
		Key: e.OrderNo, From: []string{StatusWaitPay, StatusCreated}, To: StatusPaid, Version: v,
		Set: map[string]any{"updated_at": time.Now().UTC()},
	})
	if err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: pay order %s: %w", e.OrderNo, err)
	}
	o := transitionOutcome(res, EventOrderPaid, e.OrderNo, v)
	if o.Kind == consumer.KindProcessed {
		if err := s.paidFollowUps(ctx, tx, d, e); err != nil {
			return consumer.Outcome{}, err
		}
	}
	return o, nil
}

// transitionOutcome maps the result of an order event's transition to its outcome (dedup.TransitionOutcome,
// see OrderPaid), the reason naming the event, the order and the version.
func transitionOutcome(res dedup.TransitionResult, eventType, orderNo string, v int64) consumer.Outcome {
	o, _ := dedup.TransitionOutcome(res, nil)
	if o.Reason != "" {
		o.Reason = fmt.Sprintf("%s of order %s, version %d: %s", eventType, orderNo, v, o.Reason)
	}
	return o
}
