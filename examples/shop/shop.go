// Package shop is the example business domain — orders (WAIT_PAY → PAID |
// CANCELLED, with a version), inventory reservations and releases keyed by change_id, accounts and their
// transactions keyed by transaction_id — used by cmd/example-consumer, the chaos runs and the integration
// tests. Handler writes go through the dedup transaction, so a business effect and its processed_event row
// commit together; the compensation job (CancelUnpaid) writes in transactions of its own.
package shop

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable records the shop schema's migrations.
const VersionTable = "shop_db_version"

// Migrate applies the dedup schema and the shop schema (orders, inventory_change, inventory, account,
// account_transaction, account_transaction_event) to db. Errors name the failed migration.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, err := dedup.Migrate(ctx, db); err != nil {
		return err
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("shop migrations: %w", err)
	}
	if _, err := migrate.Up(ctx, db, sub, VersionTable); err != nil {
		return err
	}
	return nil
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

// PrefixPattern is the LIKE pattern of the strings starting with prefix (its \, % and _ escaped).
func PrefixPattern(prefix string) string { return escapeLike(prefix) + "%" }

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
