package shop

import (
	"context"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// CheckOrderAggregate is the example's middleware between event identity and Version: for an order event
// (OrderEventTypes) it decodes the body and returns a permanent error (the DLQ, with the reason) when the
// body is invalid or names another order than Delivery.AggregateID (the AGGREGATE_ID property). Version
// reads the stored version of the property's order while the handler writes the body's: without this
// check an OrderCreated whose property names an existing order is acknowledged as stale and never applied,
// and an OrderPaid moves an order whose version was not checked. An order number that begins or ends with
// white space is refused by the decoder for the same reason (MariaDB's utf8mb4_bin ignores trailing
// spaces: "o1 " would load the version of "o1"). A body that is not JSON of the event's shape is
// dead-lettered here as the handler would do it (consumer.DecodeAs: reason "undecodable body: …"); fields
// the event's type does not know are accepted. Other event types, and an empty AggregateID, pass.
func CheckOrderAggregate() middleware.Middleware {
	return middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if o, err := checkOrderAggregate(d); err != nil {
				return o, err
			}
			return next.Handle(ctx, d)
		})
	})
}

// checkOrderAggregate decodes d's body by its event type (as the handler will) and compares the order
// number; a body that cannot be decoded is the handler's dead letter ("undecodable body: …").
func checkOrderAggregate(d *consumer.Delivery) (consumer.Outcome, error) {
	var orderNo string
	var o consumer.Outcome
	var err error
	switch d.EventType {
	case EventOrderCreated:
		orderNo, o, err = orderOf[OrderCreated](d, func(e OrderCreated) string { return e.OrderNo })
	case EventOrderPaid:
		orderNo, o, err = orderOf[OrderPaid](d, func(e OrderPaid) string { return e.OrderNo })
	case EventOrderCancelled:
		orderNo, o, err = orderOf[OrderCancelled](d, func(e OrderCancelled) string { return e.OrderNo })
	default:
		return consumer.Outcome{}, nil
	}
	if err != nil || d.AggregateID == "" || d.AggregateID == orderNo {
		return o, err
	}
	return consumer.Outcome{}, retry.Permanentf("shop: %s names order %q in its body but %q in its %s property", d.EventType, orderNo, d.AggregateID, PropAggregateID)
}

// orderOf decodes d's body into a T (consumer.DecodeAs with consumer.JSON, as the handler does), checks it
// and returns its order number; on failure the outcome and error to return.
func orderOf[T body](d *consumer.Delivery, order func(T) string) (string, consumer.Outcome, error) {
	e, o, err := consumer.DecodeAs[T](consumer.JSON{}, d)
	if err != nil {
		return "", o, err
	}
	if err := e.check(); err != nil {
		return "", consumer.Outcome{}, err
	}
	return order(e), consumer.Outcome{}, nil
}
