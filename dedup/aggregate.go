package dedup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// maxAggregateTypeLength is the size of aggregate_version.aggregate_type, in characters.
const maxAggregateTypeLength = 64

// aggregateKey names one aggregate whose version is kept in the aggregate_version table (migration 00004).
type aggregateKey struct {
	// Scope is the dedup scope the version belongs to (the store's scope of the delivery): two scopes keep
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
func (a aggregateKey) check() error {
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
func (a aggregateKey) String() string { return a.Type + " " + a.ID }

// aggregateOf is the key of d's aggregate of type aggregateType: d's scope (Scope) and d.AggregateID.
func (s *Store) aggregateOf(d *consumer.Delivery, aggregateType string) aggregateKey {
	return aggregateKey{Scope: s.scopeOf(d), Type: aggregateType, ID: d.AggregateID}
}

// AggregateVersion reads the stored version of d's aggregate of type aggregateType (in d's scope, with ID
// d.AggregateID) in tx and locks its row until tx ends, so that events of one aggregate are serialised; 0
// when it has no version yet. It is one statement, which inserts a placeholder row at version 0 for a new
// aggregate (the package doc, "Versions"). Errors: a permanent error for a key the table cannot hold; the
// statement's error, wrapped.
func (s *Store) AggregateVersion(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, aggregateType string) (int64, error) {
	return s.aggregateVersion(ctx, tx, s.aggregateOf(d, aggregateType))
}

// aggregateVersion is AggregateVersion of the aggregate a.
func (s *Store) aggregateVersion(ctx context.Context, tx *sqlx.Tx, a aggregateKey) (int64, error) {
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

// AdvanceAggregate moves the stored version of d's aggregate (as AggregateVersion names it) from `from`, read
// and locked by AggregateVersion in the same tx, to `to` (above from), recording d.EventID and the database's
// UTC clock: one UPDATE … WHERE version = from, which must change one row. Errors: a transient one when it
// changes none (the row is not at from: not read in tx); to ≤ from; a permanent error for a key the table
// cannot hold; the statement's error, wrapped.
func (s *Store) AdvanceAggregate(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, aggregateType string, from, to int64) error {
	return s.advanceAggregate(ctx, tx, s.aggregateOf(d, aggregateType), from, to, d.EventID)
}

// advanceAggregate is AdvanceAggregate of the aggregate a, recording eventID.
func (s *Store) advanceAggregate(ctx context.Context, tx *sqlx.Tx, a aggregateKey, from, to int64, eventID string) error {
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
// AggregateVersion and AdvanceAggregate use; middleware.Version calls it at construction (txproto.Versioned)
// unless it is given a loader. It returns an error wrapping ErrSchema naming what is missing and the fix
// (run Migrate), or the information_schema query's error, wrapped.
func (s storeProtocol) CheckAggregateSchema(ctx context.Context) error {
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
