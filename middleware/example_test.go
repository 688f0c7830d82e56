package middleware_test

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// wire is the README's wiring example; Example_wiring keeps it compiling.
func wire(ctx context.Context, dsn string, log *zap.Logger) error {
	db := sqlx.MustOpen("mysql", dsn)
	if _, err := dedup.Migrate(ctx, db.DB); err != nil {
		return err
	}
	store, _ := dedup.NewStore(db, dedup.WithTxDSN(dsn)) // transactions on a pool of its own: BEGIN, claim, writes, COMMIT
	defer store.Close()
	m, _ := metrics.New(prometheus.DefaultRegisterer)
	eventID, _ := middleware.EventID(middleware.EventIDConfig{})
	handler := middleware.Chain(
		dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			_, err := tx.ExecContext(ctx, "INSERT INTO orders (order_no) VALUES (?)", d.AggregateID)
			return consumer.Processed(), err
		}),
		middleware.Metrics(m), middleware.Recover(log), middleware.Classify(),
		eventID, middleware.Deadline(0), middleware.Dedup(store)) // Deadline(0): the consumer's HandlerTimeout, inline
	c, err := consumer.New(consumer.Config{
		NameServers: []string{"127.0.0.1:9876"}, Group: "inventory",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER", Expression: "OrderCreated"}},
		MaxAttempts:   3, HandlerTimeout: 10 * time.Second, // the deadline of each message
	}, handler, consumer.WithLogger(log), consumer.WithHealthProbe(store), consumer.WithObserver(m))
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Shutdown(context.Background())
	<-ctx.Done()
	return nil
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
		handler := middleware.Standard(h, middleware.StandardConfig{Logger: log, Store: store})
		_, err = consumer.New(consumer.Config{NameServers: []string{"127.0.0.1:9876"}, Group: "inventory",
			Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}}, handler)
		return err
	}
}
