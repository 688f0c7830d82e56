package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/retry"
)

// The business tables of dedup's tests, created by the tests themselves: an order per order_no (its
// primary key turns a second insert into a 1062), a reservation per change_id (a business action,
// dedup.Actions) and the stock on hand per SKU (one hot row per SKU).
var businessDDL = []string{
	`CREATE TABLE IF NOT EXISTS dedup_test_order (
	  order_no VARCHAR(64) NOT NULL PRIMARY KEY, sku_id VARCHAR(64) NOT NULL, quantity INT NOT NULL,
	  amount_cents BIGINT NOT NULL, status VARCHAR(20) NOT NULL, version BIGINT NOT NULL,
	  created_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS dedup_test_reservation (
	  change_id VARCHAR(128) NOT NULL PRIMARY KEY, sku_id VARCHAR(64) NOT NULL, order_no VARCHAR(64) NOT NULL,
	  quantity INT NOT NULL, created_at DATETIME(6) NOT NULL, KEY idx_dedup_test_reservation_order (order_no)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS dedup_test_stock (
	  sku_id VARCHAR(64) NOT NULL PRIMARY KEY, on_hand BIGINT NOT NULL, updated_at DATETIME(6) NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
}

// businessDB is testenv.MySQL with the tests' business tables.
func businessDB(t testing.TB) *sqlx.DB {
	t.Helper()
	db := testenv.MySQL(t)
	createBusinessTables(t, db)
	return db
}

// createBusinessTables creates the tables of businessDDL in db when they are missing.
func createBusinessTables(t testing.TB, db *sqlx.DB) {
	t.Helper()
	for _, ddl := range businessDDL {
		if _, err := db.Exec(ddl); err != nil {
			t.Fatalf("create the tests' business tables: %v", err)
		}
	}
}

// orderCreated is the event the tests send: an order and the stock it reserves.
type orderCreated struct {
	EventID     string `json:"eventId"`
	OrderNo     string `json:"orderNo"`
	SkuID       string `json:"skuId"`
	Quantity    int    `json:"quantity"`
	AmountCents int64  `json:"amountCents"`
}

// eventOrderCreated is the tag and event type of orderCreated.
const eventOrderCreated = "OrderCreated"

// reserveChangeID is the reservation key of an order.
func reserveChangeID(orderNo string) string { return "reserve:" + orderNo }

// handleOrderCreated decodes an orderCreated (an undecodable body is dead-lettered: dedup.Typed) and, in
// tx, inserts the order (WAIT_PAY, version 1; a 1062 is returned as an error), records its reservation
// and, when the reservation is new, takes the quantity off the SKU's stock. Invalid fields, or a version
// other than 1 found by the Version middleware, are a permanent error.
func handleOrderCreated(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	return dedup.Typed(consumer.JSON{}, orderCreatedTx)(ctx, tx, d)
}

// orderCreatedTx is handleOrderCreated after the decoding.
func orderCreatedTx(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e orderCreated) (consumer.Outcome, error) {
	if e.OrderNo == "" || e.SkuID == "" || e.Quantity <= 0 || e.AmountCents < 0 {
		return consumer.Outcome{}, retry.Permanent(errors.New("invalid OrderCreated: " + strings.TrimSpace(fmt.Sprintf("%+v", e))))
	}
	if d.Version > 0 && d.Version != 1 {
		return consumer.Outcome{}, retry.Permanentf("OrderCreated of order %s carries version %d; an order starts at 1", e.OrderNo, d.Version)
	}
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		 VALUES (?, ?, ?, ?, 'WAIT_PAY', 1, ?, ?)`, e.OrderNo, e.SkuID, e.Quantity, e.AmountCents, now, now); err != nil {
		return consumer.Outcome{}, fmt.Errorf("insert order %s: %w", e.OrderNo, err)
	}
	reservations, err := dedup.NewActions(dedup.ActionTable{Table: "dedup_test_reservation", KeyColumn: "change_id"})
	if err != nil {
		return consumer.Outcome{}, err
	}
	res, err := reservations.Record(ctx, tx, reserveChangeID(e.OrderNo), map[string]any{
		"sku_id": e.SkuID, "order_no": e.OrderNo, "quantity": -e.Quantity, "created_at": now})
	if err != nil {
		return consumer.Outcome{}, fmt.Errorf("reserve stock for order %s: %w", e.OrderNo, err)
	}
	if res == dedup.ActionApplied {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO dedup_test_stock (sku_id, on_hand, updated_at) VALUES (?, ?, ?)
			 ON DUPLICATE KEY UPDATE on_hand = on_hand + VALUES(on_hand), updated_at = VALUES(updated_at)`,
			e.SkuID, -int64(e.Quantity), now); err != nil {
			return consumer.Outcome{}, fmt.Errorf("stock of %s: %w", e.SkuID, err)
		}
	}
	return consumer.Processed(), nil
}

// businessEffects counts the orders and reservations whose order number starts with prefix.
func businessEffects(ctx context.Context, db *sqlx.DB, prefix string) (orders, reserved int, err error) {
	like := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(prefix) + "%"
	if err = db.GetContext(ctx, &orders, `SELECT COUNT(*) FROM dedup_test_order WHERE order_no LIKE ?`, like); err != nil {
		return 0, 0, fmt.Errorf("count orders: %w", err)
	}
	if err = db.GetContext(ctx, &reserved, `SELECT COUNT(*) FROM dedup_test_reservation WHERE order_no LIKE ?`, like); err != nil {
		return 0, 0, fmt.Errorf("count reservations: %w", err)
	}
	return orders, reserved, nil
}
