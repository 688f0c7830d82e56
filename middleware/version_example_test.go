package middleware_test

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/middleware"
)

// orderPaidChain is the README's "Aggregate versions and state transitions" wiring, line for line: Version
// after Dedup, checking OrderPaid against orders.version (States.LoadVersion), and a handler whose effect is
// one conditional transition WAIT_PAY → PAID. A stale OrderPaid is acknowledged without running the handler.
func orderPaidChain(store *dedup.Store, eventID middleware.Middleware) (consumer.Handler, error) {
	orders, err := dedup.NewStates(dedup.StateTable{Table: "orders", KeyColumn: "order_no"}) // status, version
	if err != nil {
		return nil, err // names the field whose identifier is invalid
	}
	version, err := middleware.Version(store, middleware.VersionConfig{
		AggregateType: "order", EventTypes: []string{"OrderPaid"}, Require: true, // AGGREGATE_ID, AGGREGATE_VERSION
		Load: orders.LoadVersion, // the row's own version column; 0 when the order does not exist yet
	})
	if err != nil {
		return nil, err
	}
	paid := dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		// UPDATE orders SET status = 'PAID', version = v WHERE order_no = ? AND status IN ('WAIT_PAY') AND version = v-1
		return dedup.TransitionOutcome(orders.Transition(ctx, tx, dedup.Transition{
			Key: d.AggregateID, From: []string{"WAIT_PAY"}, To: "PAID", Version: d.Version,
		})) // applied → Processed, stale → Stale, illegal → DeadLetter, ahead/missing → Retry
	})
	deduped, err := middleware.Dedup(store)
	if err != nil {
		return nil, err
	}
	handler, err := middleware.Chain(paid, middleware.Classify(), eventID, deduped, version)
	return handler, err
}

// ExampleVersion shows Version wired after Dedup with a transition handler. It is compiled, not run: it
// needs a database.
func ExampleVersion() {
	_ = orderPaidChain
}
