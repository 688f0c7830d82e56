package dedupsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/mysqlerr"
)

// Defaults and limits of Config.
const (
	// DefaultBrokerRetention is how long the broker keeps messages, and so can redeliver them or have them
	// re-read: RocketMQ's fileReservedTime, 72 hours by default.
	DefaultBrokerRetention = 72 * time.Hour
	// DefaultReplayWindow is how long after a message was processed a dead letter holding it may still be
	// replayed (an operator fixing the cause, then replaying %DLQ%<group>): 72 hours, as long as the broker
	// keeps the letter itself by default.
	DefaultReplayWindow = 72 * time.Hour
	// DefaultBatch is the number of rows a purge batch deletes.
	DefaultBatch = 1000
	// MaxBatch bounds a batch, so that one DELETE holds its row locks only briefly.
	MaxBatch = 10000
)

// ErrWindowTooShort means a purge window (Config.OlderThan, dedup.JanitorConfig.Retention) is shorter than
// BrokerRetention + ReplayWindow and Force is not set. The dedup window must cover every way an event can
// come back: a processed_event row removed while the broker still holds the message (a redelivery, a group
// reset to an old offset) or while its dead letter can be replayed lets that message apply twice.
var ErrWindowTooShort = errors.New("dedup: purge window shorter than broker retention + DLQ replay window")

// Config says which processed_event rows Purge removes: those of Scope consumed more than OlderThan
// ago by the database's UTC clock (consumed_at < UTC_TIMESTAMP(6) − OlderThan when the purge starts); and
// which lease rows: those of Scope whose lease ended before the same cutoff.
type Config struct {
	// Scope is the dedup scope (a consumer group, or the name given to dedup.WithScope). Required.
	Scope string
	// OlderThan is the dedup window: rows younger than it stay. Required; at least BrokerRetention +
	// ReplayWindow unless Force.
	OlderThan time.Duration
	// BatchSize is the number of rows one batch deletes, each batch in its own short transaction; default
	// DefaultBatch, at most MaxBatch.
	BatchSize int
	// Pause is the wait between batches, to leave the server to the consumers; default 0.
	Pause time.Duration
	// DryRun counts the rows that would be deleted and deletes nothing.
	DryRun bool
	// Force allows an OlderThan shorter than BrokerRetention + ReplayWindow.
	Force bool
	// BrokerRetention is the broker's message retention (fileReservedTime); default DefaultBrokerRetention.
	BrokerRetention time.Duration
	// ReplayWindow is how long dead letters may be replayed; default DefaultReplayWindow.
	ReplayWindow time.Duration
	// TablePrefix is the prefix of the dedup tables (dedup.WithTablePrefix): Purge deletes from
	// TablePrefix + "processed_event". Default "" (processed_event); see CheckPrefix for what it may hold.
	TablePrefix string
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatch
	}
	if c.BrokerRetention == 0 {
		c.BrokerRetention = DefaultBrokerRetention
	}
	if c.ReplayWindow == 0 {
		c.ReplayWindow = DefaultReplayWindow
	}
	return c
}

// Validate reports the first invalid field of c (after defaults), naming it (an invalid TablePrefix wraps
// ErrInvalidIdentifier); an OlderThan below
// BrokerRetention + ReplayWindow without Force is an error wrapping ErrWindowTooShort.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Scope == "" || utf8.RuneCountInString(c.Scope) > MaxScopeLength:
		return fmt.Errorf("dedup: purge: Scope %q must be 1 to %d characters", c.Scope, MaxScopeLength)
	case c.OlderThan <= 0:
		return fmt.Errorf("dedup: purge: OlderThan %s must be positive (the dedup window)", c.OlderThan)
	case c.BatchSize < 1 || c.BatchSize > MaxBatch:
		return fmt.Errorf("dedup: purge: BatchSize %d must be 1 to %d (short transactions)", c.BatchSize, MaxBatch)
	case c.Pause < 0:
		return fmt.Errorf("dedup: purge: Pause %s must not be negative", c.Pause)
	case c.BrokerRetention < 0 || c.ReplayWindow < 0:
		return fmt.Errorf("dedup: purge: BrokerRetention %s and ReplayWindow %s must not be negative", c.BrokerRetention, c.ReplayWindow)
	}
	if err := CheckPrefix(c.TablePrefix); err != nil {
		return fmt.Errorf("dedup: purge: TablePrefix: %w", err)
	}
	return CheckWindow("OlderThan", c.OlderThan, c.BrokerRetention, c.ReplayWindow, c.Force)
}

// CheckWindow refuses a window below retention + replay unless forced.
func CheckWindow(field string, window, retention, replay time.Duration, force bool) error {
	if min := retention + replay; window < min && !force {
		return fmt.Errorf("%w: %s %s < broker retention %s + replay window %s = %s: a message the broker still holds "+
			"(redelivered, or re-read from an old offset) or a dead letter replayed within its window would find no "+
			"processed_event row and apply a second time; use a window of at least %s, or force it",
			ErrWindowTooShort, field, window, retention, replay, min, min)
	}
	return nil
}

// Result is what a purge did.
type Result struct {
	// Rows is the number of processed_event rows deleted, or with DryRun the number that would be deleted.
	Rows int64
	// Leases is the number of lease rows (lease mode's event_lease) whose lease ended before Cutoff,
	// deleted (with DryRun: that would be): traces of runs that died and whose message never came back.
	Leases int64
	// Batches is the number of DELETE batches run, both tables (with DryRun: that would run).
	Batches int
	// Cutoff is the consumed_at bound (UTC, the database's clock): rows older than it were purged.
	Cutoff string
	// Elapsed is the purge's wall time.
	Elapsed time.Duration
}

// RowsPerSecond is Rows divided by Elapsed; 0 when nothing was timed.
func (r Result) RowsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Elapsed.Seconds()
}

// Purge deletes cfg.Scope's processed_event rows older than cfg.OlderThan, cfg.BatchSize at a time, then
// the scope's lease rows whose lease ended before the same cutoff (none before migration 00005); see the
// dedup package doc, "Purging". beforeBatch (nil: none) runs before each batch and its error ends the purge.
// It stops when a batch finds nothing or ctx ends (returning what it did so far and ctx's error). Errors:
// an invalid cfg before anything is read (Config.Validate); query errors, wrapped with their batch.
func Purge(ctx context.Context, db *sqlx.DB, cfg Config, beforeBatch func(context.Context) error) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.WithDefaults()
	start := time.Now()
	res, err := purgeRows(ctx, db, cfg, beforeBatch)
	res.Elapsed = time.Since(start)
	return res, err
}

// purgeQueries are the statements of a purge, built once per purge from its table's name.
type purgeQueries struct {
	count, oldest, deleteHead string
}

// newPurgeQueries writes table, a valid identifier (CheckPrefix), and its time column (processed_event's
// consumed_at, event_lease's lease_until) into the purge's statements.
func newPurgeQueries(table, at string) purgeQueries {
	return purgeQueries{
		count: `SELECT COUNT(*) FROM ` + table + ` WHERE consumer_group = ? AND ` + at + ` < ?`,
		oldest: `SELECT event_id FROM ` + table + `
		WHERE consumer_group = ? AND ` + at + ` < ? ORDER BY ` + at + ` LIMIT ?`,
		deleteHead: `DELETE FROM ` + table + ` WHERE consumer_group = ? AND ` + at + ` < ? AND event_id IN (?`,
	}
}

// purgeRows fixes the cutoff on the database's clock, then counts (DryRun) or deletes batch by batch the
// processed_event rows, then the lease rows (lease mode; none when the schema predates its table).
func purgeRows(ctx context.Context, db *sqlx.DB, cfg Config, beforeBatch func(context.Context) error) (Result, error) {
	var res Result
	processed, lease := cfg.TablePrefix+ProcessedTable, cfg.TablePrefix+LeaseTable // validated already
	cutoff, err := purgeCutoff(ctx, db, cfg.OlderThan)
	if err != nil {
		return res, err
	}
	res.Cutoff = cutoff
	var batches int
	res.Rows, batches, err = purgeTable(ctx, db, newPurgeQueries(processed, "consumed_at"), cfg, cutoff, beforeBatch)
	res.Batches += batches
	if err != nil {
		return res, err
	}
	res.Leases, batches, err = purgeTable(ctx, db, newPurgeQueries(lease, "lease_until"), cfg, cutoff, beforeBatch)
	res.Batches += batches
	if mysqlerr.MissingTable(err) {
		return res, nil // no lease mode in this schema (before migration 00005)
	}
	if err != nil {
		return res, fmt.Errorf("%w (table %s)", err, lease)
	}
	return res, nil
}

// purgeTable counts (DryRun) or deletes, batch by batch, the rows q selects for cfg.Scope before cutoff,
// and returns how many and in how many batches.
func purgeTable(ctx context.Context, db *sqlx.DB, q purgeQueries, cfg Config, cutoff string,
	beforeBatch func(context.Context) error) (rows int64, batches int, err error) {
	if cfg.DryRun {
		if err := db.GetContext(ctx, &rows, q.count, cfg.Scope, cutoff); err != nil {
			return 0, 0, fmt.Errorf("dedup: purge scope %s: count: %w", cfg.Scope, err)
		}
		return rows, int((rows + int64(cfg.BatchSize) - 1) / int64(cfg.BatchSize)), nil
	}
	for {
		if beforeBatch != nil {
			if err := beforeBatch(ctx); err != nil {
				return rows, batches, err
			}
		}
		found, deleted, err := purgeBatch(ctx, db, q, cfg.Scope, cutoff, cfg.BatchSize)
		if err != nil {
			return rows, batches, fmt.Errorf("dedup: purge scope %s batch %d: %w", cfg.Scope, batches+1, err)
		}
		if found == 0 {
			return rows, batches, nil
		}
		rows += deleted
		batches++
		if err := Sleep(ctx, cfg.Pause); err != nil {
			return rows, batches, err
		}
	}
}

// purgeCutoff returns UTC_TIMESTAMP(6) − olderThan on the database's clock, as text (independent of the
// DSN's parseTime).
func purgeCutoff(ctx context.Context, db *sqlx.DB, olderThan time.Duration) (string, error) {
	var cutoff string
	err := db.GetContext(ctx, &cutoff,
		`SELECT DATE_FORMAT(UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, '%Y-%m-%d %H:%i:%s.%f')`, olderThan.Microseconds())
	if err != nil {
		return "", fmt.Errorf("dedup: purge: cutoff from the database clock: %w", err)
	}
	return cutoff, nil
}

// purgeBatch deletes up to limit of scope's rows older than cutoff. It returns how many it found and how
// many it deleted (fewer when another purge deleted some first).
func purgeBatch(ctx context.Context, db *sqlx.DB, q purgeQueries, scope, cutoff string, limit int) (found int, deleted int64, err error) {
	var ids []string
	err = db.SelectContext(ctx, &ids, q.oldest, scope, cutoff, limit)
	if err != nil || len(ids) == 0 {
		return 0, 0, err
	}
	args := make([]any, 0, len(ids)+2)
	args = append(args, scope, cutoff)
	for _, id := range ids {
		args = append(args, id)
	}
	query := q.deleteHead + strings.Repeat(", ?", len(ids)-1) + `)`
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return len(ids), 0, err
	}
	defer func() { _ = tx.Rollback() }()
	r, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return len(ids), 0, err
	}
	if err := tx.Commit(); err != nil {
		return len(ids), 0, err
	}
	deleted, err = r.RowsAffected()
	return len(ids), deleted, err
}

// Sleep waits d, or until ctx ends (returning its error).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
