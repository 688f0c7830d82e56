package middleware_test

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/middleware"
)

// versionChain is the wiring of the README's "Checking aggregate versions": Version after Dedup, the
// stored version in aggregate_version (dedup.Migrate creates it), events carrying AGGREGATE_ID and
// AGGREGATE_VERSION. A stale OrderPaid is acknowledged without running the handler.
func versionChain(store *dedup.Store, eventID consumer.Middleware) (consumer.Handler, error) {
	version, err := middleware.Version(store, middleware.VersionConfig{
		AggregateType: "order", EventTypes: []string{"OrderPaid"}, Require: true, // GapRetries 3, then the DLQ
	})
	if err != nil {
		return nil, err // names the field, or says aggregate_version is missing
	}
	return middleware.Chain(
		dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			// d.Version is the stored version + 1 here
			_, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'PAID' WHERE order_no = ?", d.AggregateID)
			return consumer.Processed(), err
		}),
		middleware.Classify(), eventID, middleware.Dedup(store), version), nil
}

// ExampleVersion shows Version wired after Dedup. It is compiled, not run: it needs a database.
func ExampleVersion() {
	_ = versionChain
}
