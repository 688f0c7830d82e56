package shop

import (
	"context"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// CheckOrderAggregate is the example's middleware between event identity and Version: for an order event
// (OrderEventTypes) it decodes the body and returns a permanent error (the DLQ, with the reason) when the
// body is invalid or names another order than Delivery.AggregateID (the AGGREGATE_ID property). Version
// reads the stored version of the property's order while the handler writes the body's: without this
// check an OrderCreated whose property names an existing order is acknowledged as stale and never applied,
// and an OrderPaid moves an order whose version was not checked. An order number that begins or ends with
// white space is refused by the decoder for the same reason (MariaDB's utf8mb4_bin ignores trailing
// spaces: "o1 " would load the version of "o1"). Other event types, and an empty AggregateID, pass.
func CheckOrderAggregate() consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if err := checkOrderAggregate(d); err != nil {
				return consumer.Outcome{}, err
			}
			return next(ctx, d)
		}
	}
}

// checkOrderAggregate decodes d's body by its event type and compares the order number.
func checkOrderAggregate(d *consumer.Delivery) error {
	var orderNo string
	switch d.EventType {
	case EventOrderCreated:
		e, err := Decode(d.Msg.Body)
		if err != nil {
			return err
		}
		orderNo = e.OrderNo
	case EventOrderPaid:
		e, err := DecodeOrderPaid(d.Msg.Body)
		if err != nil {
			return err
		}
		orderNo = e.OrderNo
	case EventOrderCancelled:
		e, err := DecodeOrderCancelled(d.Msg.Body)
		if err != nil {
			return err
		}
		orderNo = e.OrderNo
	default:
		return nil
	}
	if d.AggregateID == "" || d.AggregateID == orderNo {
		return nil
	}
	return retry.Permanentf("shop: %s names order %q in its body but %q in its %s property", d.EventType, orderNo, d.AggregateID, PropAggregateID)
}
