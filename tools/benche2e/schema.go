package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// tableName turns parts into a table name of the run: lower case, '-' as '_'.
func tableName(parts ...string) string {
	return strings.ToLower(strings.ReplaceAll(strings.Join(parts, "_"), "-", "_"))
}

// createBusinessTable creates the business table a variant writes one row per message into (an order
// row: order number, event ID, user, amount), and records it for cleanup.
func createBusinessTable(ctx context.Context, env *environment, name string) error {
	_, err := env.db.ExecContext(ctx, `CREATE TABLE `+name+` (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_no VARCHAR(160) NOT NULL,
		event_id VARCHAR(128) NOT NULL,
		user_id BIGINT NOT NULL,
		amount DECIMAL(12,2) NOT NULL,
		created_at DATETIME(6) NOT NULL,
		KEY idx_order_no (order_no)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`)
	if err != nil {
		return fmt.Errorf("create business table %s: %w", name, err)
	}
	env.cleanup.table(name)
	return nil
}

// createDedupTable creates the baseline's own dedup table with processed_event's shape (same columns and
// keys), and records it for cleanup.
func createDedupTable(ctx context.Context, env *environment, name string) error {
	if _, err := env.db.ExecContext(ctx, `CREATE TABLE `+name+` LIKE processed_event`); err != nil {
		return fmt.Errorf("create dedup table %s: %w", name, err)
	}
	env.cleanup.table(name)
	return nil
}

// The business row of an OrderCreated event: the INSERT's head (before VALUES, after the table) and one
// row's placeholders, whose arguments businessArgs appends.
const (
	businessColumns = ` (order_no, event_id, user_id, amount, created_at) VALUES `
	businessRow     = `(?, ?, ?, ?, UTC_TIMESTAMP(6))`
)

// businessArgs appends the arguments of businessRow for eventID to args.
func businessArgs(args []any, eventID string) []any {
	return append(args, "O-"+eventID, eventID, 1000, "10.50")
}

// insertBusinessRow inserts the business row of one OrderCreated event through ex.
func insertBusinessRow(ctx context.Context, ex sqlx.ExecerContext, table, eventID string) error {
	_, err := ex.ExecContext(ctx, `INSERT INTO `+table+businessColumns+businessRow, businessArgs(make([]any, 0, 4), eventID)...)
	if err != nil {
		return fmt.Errorf("insert business row of %s: %w", eventID, err)
	}
	return nil
}

// markProcessed inserts committed processed_event rows for every event of b in dedup scope (MariaDB's
// Sequence engine generates them), so that each of b's messages is a duplicate for that scope.
func markProcessed(ctx context.Context, env *environment, scope string, b backlog) error {
	env.cleanup.scope(scope)
	const chunk = 100_000
	for from := 0; from < b.n; from += chunk {
		to := min(from+chunk, b.n) - 1
		_, err := env.db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO processed_event
			(consumer_group, event_id, event_type, topic, msg_id, consumed_at, result_status)
			SELECT ?, CONCAT(?, seq), 'OrderCreated', ?, 'prefilled', UTC_TIMESTAMP(6), 'SUCCESS'
			FROM seq_%d_to_%d`, from, to), scope, b.prefix, b.topic)
		if err != nil {
			return fmt.Errorf("mark %s processed for %s: %w", b.topic, scope, err)
		}
	}
	return nil
}
