package middleware_test

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// wire is the README's "Wiring a consumer" example, the pieces Standard and dedup.Open put together, each
// error checked; Example_wiring keeps it compiling and TestREADMEWiringIsTheCompiledExample keeps the README
// equal to it.
func wire(ctx context.Context, dsn string, logger *zap.Logger) error {
	db, err := sqlx.Open("mysql", dsn) // your pool; the dedup store shares it for its own reads
	if err != nil {
		return err
	}
	if _, err := dedup.Migrate(ctx, db.DB); err != nil { // processed_event, aggregate_version tables
		return err
	}
	m, err := metrics.New(prometheus.DefaultRegisterer)
	if err != nil {
		return err
	}
	store, err := dedup.NewStore(db, dedup.WithTxDSN(dsn), // transactions on a pool of its own: BEGIN, claim, writes, COMMIT
		dedup.WithLogger(logger), dedup.WithObserver(m)) // after-commit hooks that failed: logged and counted
	if err != nil {
		return err
	}
	defer store.Close()
	eventID, err := middleware.EventID(middleware.EventIDConfig{}) // the EVENT_ID property
	if err != nil {
		return err
	}
	observed, err := middleware.Metrics(m)
	if err != nil {
		return err
	}
	deduped, err := middleware.Dedup(store)
	if err != nil {
		return err
	}
	handler, err := middleware.Chain(
		dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			// business writes go through tx: they commit with the dedup row, or not at all
			_, err := tx.ExecContext(ctx, "INSERT INTO orders (order_no) VALUES (?)", d.AggregateID)
			return consumer.Processed(), err
		}),
		observed, middleware.Recover(logger), middleware.Classify(),
		eventID, middleware.Deadline(0), deduped) // Deadline(0): the consumer's HandlerTimeout, inline
	if err != nil {
		return err // a wrong chain names the fix
	}
	c, err := consumer.New(consumer.Config{
		NameServers: []string{"127.0.0.1:9876"}, Group: "inventory",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER", Expression: "OrderCreated"}},
		MaxAttempts:   3, HandlerTimeout: 10 * time.Second, // the deadline of each message
	}, handler, consumer.WithLogger(logger), // one line per message at its final decision, see Logs
		consumer.WithHealthProbe(store), consumer.WithObserver(m)) // pause on a store outage; final-decision metrics, lag
	if err != nil {
		return err // an invalid Config names the field; a wrongly ordered chain names the fix
	}
	return c.Run(ctx) // Start; when ctx ends, Shutdown: drains in-flight handlers, then stops the client
}

// Example_wiring shows a consumer wired with the standard chain (the README's example). It is compiled,
// not run: it needs a broker and a database.
func Example_wiring() {
	_ = wire
}

// Example_standard builds the recommended chain in one call. A nil store (dedup.NewStore failed) or a bad
// EventIDConfig is not a panic here: consumer.New returns the error. Compiled, not run (it needs a broker).
func Example_standard() {
	_ = func(db *sqlx.DB, log *zap.Logger, h consumer.Handler) error {
		store, err := dedup.NewStore(db)
		if err != nil {
			return err
		}
		handler := testenv.Must(middleware.Standard(h, middleware.StandardConfig{Logger: log, Store: store}))
		_, err = consumer.New(consumer.Config{NameServers: []string{"127.0.0.1:9876"}, Group: "inventory",
			Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}}, handler)
		return err
	}
}
