package dedup

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// ActionResult is what recording one business action found.
type ActionResult uint8

const (
	// ActionApplied: the action's row was inserted; apply its effect in the same transaction.
	ActionApplied ActionResult = iota + 1
	// ActionAlreadyApplied: a row with the action's key exists (MySQL 1062 on the action key): another
	// message, a compensation job or an earlier delivery applied it; apply nothing.
	ActionAlreadyApplied
)

// ActionTable names a table of business actions keyed by an action ID (inventory_change.change_id,
// account_transaction.transaction_id).
type ActionTable struct {
	// Table is the table's name. Required.
	Table string
	// KeyColumn is the action ID column. Required.
	KeyColumn string
	// KeyName is the name of the unique key on KeyColumn as MySQL reports it in error 1062. Default "PRIMARY".
	KeyName string
}

// Actions records business actions in one ActionTable.
type Actions struct {
	t ActionTable
}

// NewActions validates t and returns its recorder.
func NewActions(t ActionTable) (*Actions, error) { return nil, errTransitionTODO }

// Record inserts the action row (KeyColumn = id, plus columns) in tx.
func (a *Actions) Record(ctx context.Context, tx *sqlx.Tx, id string, columns map[string]any) (ActionResult, error) {
	return 0, errTransitionTODO
}
