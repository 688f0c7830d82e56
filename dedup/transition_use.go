package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
)

// LoadVersion reads the version column of the row whose key is aggregateID, in tx; 0 when there is no such
// row (the aggregate does not exist yet). Its signature is middleware.VersionLoader's, so
// `VersionConfig{Load: orders.LoadVersion}` makes middleware.Version check events against the table's own
// version column. The read does not lock: the handler's Transition is the conditional update that settles a
// concurrent change (a locking read of a missing row would take a gap lock, and first events of different new
// rows would then deadlock on their inserts). Errors are the query's, wrapped with the table and key.
func (s *States) LoadVersion(ctx context.Context, tx *sqlx.Tx, aggregateID string) (int64, error) {
	var v int64
	err := tx.GetContext(ctx, &v, s.load, aggregateID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("dedup: load version of %s key %s: %w", s.t.Table, aggregateID, err)
	}
	return v, nil
}

// TransitionOutcome is the usual outcome of a handler whose whole effect is one Transition:
// TransitionApplied → consumer.Processed; TransitionStale → consumer.Stale (acknowledged; the dedup
// middleware rolls back and records the event as stale); TransitionIllegal → consumer.DeadLetter (the row
// is in a status this event can never move it from: an operator decides); TransitionAhead and
// TransitionMissing → consumer.Retry at the broker's schedule (an earlier event, or the one creating the row,
// has not been applied yet). A non-nil err is returned as it is, with the zero Outcome (a retry).
func TransitionOutcome(r TransitionResult, err error) (consumer.Outcome, error) {
	if err != nil {
		return consumer.Outcome{}, err
	}
	switch r {
	case TransitionApplied:
		return consumer.Processed(), nil
	case TransitionStale:
		return consumer.Stale("transition: the row is already at or past the event's version"), nil
	case TransitionIllegal:
		return consumer.DeadLetter("transition: the row is in a status the event cannot move it from"), nil
	}
	return consumer.Retry(0, "transition: row "+r.String()+": an earlier event has not been applied yet"), nil
}
