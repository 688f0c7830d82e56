// Package shop is the example business domain of chapter 13 — orders and inventory reservations — used by
// cmd/example-consumer and by the integration tests. Its writes go through the dedup transaction, so the
// business effect and the processed_event row commit together.
package shop

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable records the shop schema's migrations.
const VersionTable = "shop_db_version"

// EventOrderCreated is the event type (and tag) of OrderCreated.
const EventOrderCreated = "OrderCreated"

// Migrate applies the dedup schema and the shop schema (orders, inventory_change) to db.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, err := dedup.Migrate(ctx, db); err != nil {
		return err
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("shop migrations: %w", err)
	}
	if _, err := dedup.RunMigrations(ctx, db, sub, VersionTable); err != nil {
		return err
	}
	return nil
}

// OrderCreated is the JSON body of an OrderCreated event.
type OrderCreated struct {
	// EventID is the business event ID; producers also put it in the EVENT_ID property.
	EventID string `json:"eventId"`
	// OrderNo is the order number, the aggregate ID.
	OrderNo string `json:"orderNo"`
	// SkuID is the stock-keeping unit reserved.
	SkuID string `json:"skuId"`
	// Quantity is the number of units reserved, > 0.
	Quantity int `json:"quantity"`
	// AmountCents is the order total in cents, ≥ 0.
	AmountCents int64 `json:"amountCents"`
	// FailOnce makes the handler fail its first attempt with a transient error (a demo of retries).
	FailOnce bool `json:"failOnce,omitempty"`
}

// ErrInjected is the transient failure a FailOnce event produces on its first attempt.
var ErrInjected = errors.New("shop: injected transient failure (failOnce)")

// Decode parses and validates an OrderCreated body; a leading UTF-8 byte-order mark is skipped (RFC 8259
// lets a parser ignore it; some producers write one). Errors are permanent: a body that cannot be read
// will never be readable, so it goes to the DLQ with the reason instead of looping.
func Decode(body []byte) (OrderCreated, error) {
	var e OrderCreated
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(body, []byte("\uFEFF"))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, retry.Permanent(fmt.Errorf("shop: OrderCreated body is not valid JSON: %w", err))
	}
	var problems []string
	if e.OrderNo == "" || len(e.OrderNo) > 64 {
		problems = append(problems, "orderNo must have 1..64 characters")
	}
	if e.SkuID == "" || len(e.SkuID) > 64 {
		problems = append(problems, "skuId must have 1..64 characters")
	}
	if e.Quantity <= 0 {
		problems = append(problems, "quantity must be > 0")
	}
	if e.AmountCents < 0 {
		problems = append(problems, "amountCents must be ≥ 0")
	}
	if len(problems) > 0 {
		return e, retry.Permanent(fmt.Errorf("shop: invalid OrderCreated: %s", strings.Join(problems, "; ")))
	}
	return e, nil
}

// ReserveChangeID is the business unique key of an order's stock reservation (chapter 13.5).
func ReserveChangeID(orderNo string) string { return "reserve:" + orderNo }

// HandleOrderCreated creates the order row and its inventory_change row in tx. A 1062 on either table's
// key is returned as an error (the dedup row, not a business key, is how a repeat is recognised).
func HandleOrderCreated(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	e, err := Decode(d.Msg.Body)
	if err != nil {
		return consumer.Outcome{}, err
	}
	if e.FailOnce && d.Attempt == 0 {
		return consumer.Outcome{}, retry.Transient(ErrInjected)
	}
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO orders (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		 VALUES (?, ?, ?, ?, 'CREATED', 1, ?, ?)`, e.OrderNo, e.SkuID, e.Quantity, e.AmountCents, now, now); err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: insert order %s: %w", e.OrderNo, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO inventory_change (change_id, sku_id, order_no, quantity, created_at) VALUES (?, ?, ?, ?, ?)`,
		ReserveChangeID(e.OrderNo), e.SkuID, e.OrderNo, -e.Quantity, now); err != nil {
		return consumer.Outcome{}, fmt.Errorf("shop: reserve stock for order %s: %w", e.OrderNo, err)
	}
	return consumer.Processed(), nil
}

// Effects counts the business effects of the orders whose number starts with prefix: order rows and
// inventory_change rows.
func Effects(ctx context.Context, db *sqlx.DB, prefix string) (orders, reservations int, err error) {
	like := escapeLike(prefix) + "%"
	if err = db.GetContext(ctx, &orders, `SELECT COUNT(*) FROM orders WHERE order_no LIKE ?`, like); err != nil {
		return 0, 0, fmt.Errorf("shop: count orders: %w", err)
	}
	if err = db.GetContext(ctx, &reservations, `SELECT COUNT(*) FROM inventory_change WHERE order_no LIKE ?`, like); err != nil {
		return 0, 0, fmt.Errorf("shop: count reservations: %w", err)
	}
	return orders, reservations, nil
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
