// Package outboxadmin lists, retries and purges the rows of an outbox table: what `rmqguard outbox` does
// for an operator. The relay itself (package outbox) never needs it. Each function takes the dedup table
// prefix of the outbox, already checked (dedupsql.CheckPrefix).
package outboxadmin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/outboxsql"
)

// List returns up to limit rows of the outbox of prefix with status ("" for every row not yet sent), oldest
// first.
func List(ctx context.Context, db *sqlx.DB, prefix string, status string, limit int) ([]Row, error) {
	q := `SELECT id, kind, event_id, source_event_id, name, sharding_key, topic, status, attempts, last_error, created_at
	 FROM ` + prefix + outboxsql.Table + ` WHERE `
	args := []any{}
	if status == "" {
		q += `status IN ('pending', 'parked')`
	} else {
		q += `status = ?`
		args = append(args, status)
	}
	q += ` ORDER BY id LIMIT ?`
	var rows []Row
	if err := db.SelectContext(ctx, &rows, q, append(args, limit)...); err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	return rows, nil
}

// Retry makes parked rows of the outbox of prefix pending again, due now, with their attempts reset: the rows
// of ids, or every parked row when ids is empty. It returns how many rows it changed.
func Retry(ctx context.Context, db *sqlx.DB, prefix string, ids ...int64) (int64, error) {
	q := `UPDATE ` + prefix + outboxsql.Table + ` SET status = 'pending', attempts = 0, next_attempt_at = UTC_TIMESTAMP(6)
	 WHERE status = 'parked'`
	var args []any
	if len(ids) > 0 {
		var err error
		if q, args, err = sqlx.In(q+` AND id IN (?)`, ids); err != nil {
			return 0, fmt.Errorf("outbox: retry: %w", err)
		}
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("outbox: retry: %w", err)
	}
	return res.RowsAffected()
}

// Purge deletes the rows of the outbox of prefix sent more than olderThan ago (database clock), in batches of
// batch rows (default 1000), and returns how many it deleted; a pending or parked row is never deleted. It
// deletes in id order up to the first sent row still inside the window (rows are sent about in id order; a row
// retried long after it was parked holds the purge of the rows after it until it ages too), so that each
// statement reads what it deletes, not every sent row.
func Purge(ctx context.Context, db *sqlx.DB, prefix string, olderThan time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	table, older := prefix+outboxsql.Table, olderThan.Microseconds()
	var bound int64
	err := db.GetContext(ctx, &bound, `SELECT id FROM `+table+` FORCE INDEX (idx_outbox_pending)
	 WHERE status = 'sent' AND sent_at >= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY id LIMIT 1`, older)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		bound = math.MaxInt64
	case err != nil:
		return 0, fmt.Errorf("outbox: purge: first sent row inside the window: %w", err)
	}
	q := `DELETE FROM ` + table + ` WHERE status = 'sent' AND id < ? AND sent_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
	 ORDER BY id LIMIT ?`
	var total int64
	for {
		res, err := db.ExecContext(ctx, q, bound, older, batch)
		if err != nil {
			return total, fmt.Errorf("outbox: purge: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// Row is an outbox row as List shows it.
type Row struct {
	ID            int64     `db:"id"`
	Kind          string    `db:"kind"`
	EventID       string    `db:"event_id"`
	SourceEventID string    `db:"source_event_id"`
	Name          string    `db:"name"`
	ShardingKey   string    `db:"sharding_key"`
	Topic         string    `db:"topic"`
	Status        string    `db:"status"`
	Attempts      int       `db:"attempts"`
	LastError     string    `db:"last_error"`
	CreatedAt     time.Time `db:"created_at"`
}

// Parked counts the parked rows of one dedup scope by kind.
type Parked struct {
	Messages, Effects int
}

// ParkedByScope counts the parked rows of the outbox of prefix, by scope (the dedup scope of the event
// that added them). Errors are wrapped; a missing table is mysqlerr.MissingTable's.
func ParkedByScope(ctx context.Context, db *sqlx.DB, prefix string) (map[string]Parked, error) {
	var rows []struct {
		Scope string `db:"scope"`
		Kind  string `db:"kind"`
		N     int    `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT scope, kind, COUNT(*) AS n FROM `+prefix+outboxsql.Table+`
	 WHERE status = ? GROUP BY scope, kind`, outboxsql.StatusParked); err != nil {
		return nil, fmt.Errorf("outbox: parked rows: %w", err)
	}
	out := map[string]Parked{}
	for _, r := range rows {
		p := out[r.Scope]
		if r.Kind == outboxsql.KindEffect {
			p.Effects += r.N
		} else {
			p.Messages += r.N
		}
		out[r.Scope] = p
	}
	return out, nil
}
