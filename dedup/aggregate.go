package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/retry"
)

// MaxAggregateTypeLength is the size of aggregate_version.aggregate_type, in characters.
const MaxAggregateTypeLength = 64

// Aggregate names one aggregate whose version is kept in the aggregate_version table (migration 00004).
type Aggregate struct {
	// Scope is the dedup scope the version belongs to (Store.Scope of the delivery): two scopes keep
	// separate versions of one aggregate, as they keep separate processed_event rows.
	Scope string
	// Type is the aggregate type, e.g. "order"; at most MaxAggregateTypeLength characters.
	Type string
	// ID is the aggregate ID, e.g. "o-1"; at most MaxAggregateIDLength characters.
	ID string
}

// ErrVersionMoved means the stored version of an aggregate was not the one the transaction read when it
// tried to advance it: a concurrent transaction inserted the aggregate's first row (MySQL 1062) or moved it.
// Nothing is applied; the message is retried and then sees the new version. It classifies as transient.
var ErrVersionMoved = retry.Transient(errors.New("dedup: the aggregate's stored version moved under the transaction"))

// check rejects a key the aggregate_version columns cannot hold, as permanent.
func (a Aggregate) check() error {
	switch {
	case a.ID == "" || utf8.RuneCountInString(a.ID) > MaxAggregateIDLength:
		return retry.Permanentf("dedup: aggregate ID %q is empty or longer than %d characters", a.ID, MaxAggregateIDLength)
	case a.Type == "" || utf8.RuneCountInString(a.Type) > MaxAggregateTypeLength:
		return retry.Permanentf("dedup: aggregate type %q is empty or longer than %d characters", a.Type, MaxAggregateTypeLength)
	case utf8.RuneCountInString(a.Scope) > MaxGroupLength:
		return retry.Permanentf("dedup: scope %q is longer than %d characters", a.Scope, MaxGroupLength)
	}
	return nil
}

// String renders the aggregate as "type id" for errors and reasons.
func (a Aggregate) String() string { return a.Type + " " + a.ID }

// AggregateVersion reads a's stored version in tx with a locking read (SELECT … FOR UPDATE), so that
// events of one aggregate handled at once are serialised: the second waits until the first commits or
// rolls back and then reads what it left. It returns 0 when the aggregate has no row yet. Two first events
// of one new aggregate may both find no row; one of them then fails with a deadlock (MySQL 1213) or
// ErrVersionMoved in AdvanceAggregate, both transient: it is retried and finds the other's version. It
// returns a permanent error for a key the table cannot hold and the query's error, wrapped.
func (s *Store) AggregateVersion(ctx context.Context, tx *sqlx.Tx, a Aggregate) (int64, error) {
	if err := a.check(); err != nil {
		return 0, err
	}
	var v int64
	err := tx.GetContext(ctx, &v,
		`SELECT version FROM aggregate_version
		 WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ? FOR UPDATE`, a.Scope, a.Type, a.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dedup: read version of %s: %w", a, err)
	}
	return v, nil
}

// AdvanceAggregate moves a's stored version from `from`, the version AggregateVersion read in the same tx
// (0: no row), to `to` (above from), recording eventID as the event that set it and the database's UTC
// clock as updated_at. With no row it inserts one; otherwise it runs one conditional UPDATE … WHERE version
// = from, which must change exactly one row. It returns an error wrapping ErrVersionMoved (transient) when
// the insert hits the key (MySQL 1062) or the UPDATE changes no row, an error for to ≤ from, and the
// statement's error, wrapped.
func (s *Store) AdvanceAggregate(ctx context.Context, tx *sqlx.Tx, a Aggregate, from, to int64, eventID string) error {
	if to <= from {
		return fmt.Errorf("dedup: advance %s from version %d to %d: the new version must be higher", a, from, to)
	}
	if err := a.check(); err != nil {
		return err
	}
	if from == 0 {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO aggregate_version (consumer_group, aggregate_type, aggregate_id, version, event_id, updated_at)
			 VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))`, a.Scope, a.Type, a.ID, to, eventID)
		if _, dup := retry.DuplicateKey(err); dup {
			return fmt.Errorf("advance %s to version %d: a concurrent event created it: %w", a, to, ErrVersionMoved)
		}
		if err != nil {
			return fmt.Errorf("dedup: advance %s to version %d: %w", a, to, err)
		}
		return nil
	}
	res, err := tx.ExecContext(ctx,
		`UPDATE aggregate_version SET version = ?, event_id = ?, updated_at = UTC_TIMESTAMP(6)
		 WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ? AND version = ?`,
		to, eventID, a.Scope, a.Type, a.ID, from)
	if err != nil {
		return fmt.Errorf("dedup: advance %s from version %d to %d: %w", a, from, to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("dedup: advance %s from version %d to %d: rows affected: %w", a, from, to, err)
	}
	if n != 1 {
		return fmt.Errorf("advance %s from version %d to %d: %d rows changed: %w", a, from, to, n, ErrVersionMoved)
	}
	return nil
}
