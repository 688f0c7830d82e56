package dedup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/retry"
)

// maxAggregateTypeLength is the size of aggregate_version.aggregate_type, in characters.
const maxAggregateTypeLength = 64

// Aggregate names one aggregate whose version is kept in the aggregate_version table (migration 00004).
type Aggregate struct {
	// Scope is the dedup scope the version belongs to (Store.Scope of the delivery): two scopes keep
	// separate versions of one aggregate, as they keep separate processed_event rows.
	Scope string
	// Type is the aggregate type, e.g. "order"; at most maxAggregateTypeLength characters.
	Type string
	// ID is the aggregate ID, e.g. "o-1"; at most maxAggregateIDLength characters.
	ID string
}

// errVersionMoved means the stored version of an aggregate was not the one the transaction read when it
// tried to advance it (AdvanceAggregate without AggregateVersion's lock in the same transaction). Nothing is
// applied; the message is retried and then sees the new version. It classifies as transient.
var errVersionMoved = retry.Transient(errors.New("dedup: the aggregate's stored version moved under the transaction"))

// check rejects a key the aggregate_version columns cannot hold, as permanent.
func (a Aggregate) check() error {
	switch {
	case a.ID == "" || utf8.RuneCountInString(a.ID) > maxAggregateIDLength:
		return retry.Permanentf("dedup: aggregate ID %q is empty or longer than %d characters", a.ID, maxAggregateIDLength)
	case a.Type == "" || utf8.RuneCountInString(a.Type) > maxAggregateTypeLength:
		return retry.Permanentf("dedup: aggregate type %q is empty or longer than %d characters", a.Type, maxAggregateTypeLength)
	case utf8.RuneCountInString(a.Scope) > maxGroupLength:
		return retry.Permanentf("dedup: scope %q is longer than %d characters", a.Scope, maxGroupLength)
	}
	return nil
}

// String renders the aggregate as "type id" for errors and reasons.
func (a Aggregate) String() string { return a.Type + " " + a.ID }

// AggregateVersion reads a's stored version in tx and locks a's row until tx ends, so that events of one
// aggregate handled at once are serialised; 0 when the aggregate has no version yet. It is one statement,
// which inserts a placeholder row at version 0 for a new aggregate (the package doc, "Versions"). Errors:
// a permanent error for a key the table cannot hold; the statement's error, wrapped.
func (s *Store) AggregateVersion(ctx context.Context, tx *sqlx.Tx, a Aggregate) (int64, error) {
	if err := a.check(); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, s.q.aggregateRead, a.Scope, a.Type, a.ID)
	if err != nil {
		return 0, fmt.Errorf("dedup: read version of %s: %w", a, err)
	}
	v, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("dedup: read version of %s: insert ID: %w", a, err)
	}
	return v, nil
}

// AdvanceAggregate moves a's stored version from `from`, the version AggregateVersion read (and locked) in
// the same tx, to `to` (above from), recording eventID as the event that set it and the database's UTC clock
// as updated_at: one conditional UPDATE … WHERE version = from, which must change exactly one row. It returns
// an error wrapping errVersionMoved (transient) when it changes none (the row is not at from: not read in
// tx), an error for to ≤ from, a permanent error for a key the table cannot hold, and the statement's
// error, wrapped.
func (s *Store) AdvanceAggregate(ctx context.Context, tx *sqlx.Tx, a Aggregate, from, to int64, eventID string) error {
	if to <= from {
		return fmt.Errorf("dedup: advance %s from version %d to %d: the new version must be higher", a, from, to)
	}
	if err := a.check(); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, s.q.aggregateAdvance,
		to, eventID, a.Scope, a.Type, a.ID, from)
	if err != nil {
		return fmt.Errorf("dedup: advance %s from version %d to %d: %w", a, from, to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("dedup: advance %s from version %d to %d: rows affected: %w", a, from, to, err)
	}
	if n != 1 {
		return fmt.Errorf("advance %s from version %d to %d: %d rows changed: %w", a, from, to, n, errVersionMoved)
	}
	return nil
}

// aggregateColumns are the columns of aggregate_version that AggregateVersion and AdvanceAggregate use.
var aggregateColumns = []string{"consumer_group", "aggregate_type", "aggregate_id", "version", "event_id", "updated_at"}

// CheckAggregateSchema verifies that the store's aggregate-version table (aggregate_version, or its name
// with the store's WithTablePrefix), in the store's current database, exists with the columns
// AggregateVersion and AdvanceAggregate use; middleware.Version calls it at construction unless it
// is given a loader. It returns an error wrapping ErrSchema naming what is missing and the fix (run
// Migrate), or the information_schema query's error, wrapped.
func (s *Store) CheckAggregateSchema(ctx context.Context) error {
	table := s.tables.aggregate()
	var cols []string
	err := s.db.SelectContext(ctx, &cols, `SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
	if err != nil {
		return fmt.Errorf("dedup: check schema: columns of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return fmt.Errorf("%w: %s is missing from the current database; fix: run dedup.Migrate%s", ErrSchema, table, s.tables.migrateHint())
	}
	var missing []string
	for _, c := range aggregateColumns {
		if !slices.Contains(cols, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks column(s) %s; fix: run dedup.Migrate%s", ErrSchema, table, strings.Join(missing, ", "), s.tables.migrateHint())
	}
	return nil
}
