package dedup

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"
)

// TransitionResult is what one conditional state transition found. Its zero value is not a result: a
// transition that did not run reports an error instead.
type TransitionResult uint8

const (
	// TransitionApplied: the row was in an allowed status at the expected version and has moved.
	TransitionApplied TransitionResult = iota + 1
	// TransitionStale: the row's version is already at or past the event's: a newer event moved it; the
	// event must write nothing (acknowledge it as stale).
	TransitionStale
	// TransitionIllegal: the row is at the expected version but in a status the event cannot move it from.
	TransitionIllegal
	// TransitionAhead: the row's version is below the one the event expects: an earlier event has not been
	// applied yet (retry the event later).
	TransitionAhead
	// TransitionMissing: no row has the key.
	TransitionMissing
)

// StateTable names a table whose rows carry a status and a version column: an aggregate with a state
// machine (an order: WAIT_PAY → PAID). Every name must pass ValidIdentifier.
type StateTable struct {
	// Table is the table's name, e.g. "orders". Required.
	Table string
	// KeyColumn is the row's key column, e.g. "order_no". Required.
	KeyColumn string
	// StatusColumn holds the status. Default "status".
	StatusColumn string
	// VersionColumn holds the version, a BIGINT that moves up by one per applied event. Default "version".
	VersionColumn string
}

// Transition is one event's move of one row.
type Transition struct {
	// Key is the row's key value.
	Key any
	// From lists the statuses the event may move the row from. At least one.
	From []string
	// To is the status the row moves to.
	To string
	// Version is the event's version: the row must be at Version-1 and is set to Version (Delivery.Version
	// when middleware.Version runs). At least 1.
	Version int64
	// Set holds further columns to set in the same UPDATE (e.g. "paid_at"); names must pass ValidIdentifier.
	Set map[string]any
}

// States runs conditional transitions on one StateTable.
type States struct {
	t StateTable
}

// errTransitionTODO marks the skeleton before the transition helper is written.
var errTransitionTODO = errors.New("dedup: transition helper not built yet")

// NewStates validates t (every name a plain identifier) and returns its transition runner.
func NewStates(t StateTable) (*States, error) { return nil, errTransitionTODO }

// Transition runs tr as one conditional UPDATE in tx.
func (s *States) Transition(ctx context.Context, tx *sqlx.Tx, tr Transition) (TransitionResult, error) {
	return 0, errTransitionTODO
}
