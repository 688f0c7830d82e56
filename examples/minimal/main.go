// Command minimal is a complete rmqguard consumer: OrderCreated events from the ORDER topic (JSON bodies,
// the event ID in the EVENT_ID property), each applied once to the orders table. It reads the database DSN
// from RMQGUARD_MYSQL_DSN and the name server from RMQGUARD_NAMESRV, and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/go-sql-driver/mysql" // the database/sql driver dedup.Open uses
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/middleware"
)

// OrderCreated is the message body; fields it does not declare are ignored.
type OrderCreated struct {
	OrderNo  string `json:"orderNo"`
	Quantity int    `json:"quantity"`
}

// applyOrderCreated writes through tx: the order commits with the event's dedup row, or not at all. The order
// number is the business key: an order created again under another event ID is the same order.
func applyOrderCreated(ctx context.Context, tx *sqlx.Tx, _ *consumer.Delivery, e OrderCreated) (consumer.Outcome, error) {
	_, err := tx.ExecContext(ctx, "INSERT INTO orders (order_no, quantity) VALUES (?, ?) ON DUPLICATE KEY UPDATE order_no = order_no",
		e.OrderNo, e.Quantity)
	return consumer.Processed(), err
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := dedup.Open(ctx, os.Getenv("RMQGUARD_MYSQL_DSN"))
	if err != nil {
		return err
	}
	defer store.Close()
	handler, err := middleware.Standard(dedup.HandleJSON(applyOrderCreated), middleware.StandardConfig{Store: store})
	if err != nil {
		return err // a wrong chain names the fix
	}
	c, err := consumer.New(consumer.Config{NameServers: []string{os.Getenv("RMQGUARD_NAMESRV")}, Group: "inventory",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER", Expression: "OrderCreated"}}}, handler)
	if err != nil {
		return err // an invalid Config names the field
	}
	return c.Run(ctx) // until SIGINT/SIGTERM; then drains in-flight messages and stops
}
