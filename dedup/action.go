package dedup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/retry"
)

// ActionResult is what recording one business action found. Its zero value is not a result: a record
// that did not run reports an error instead.
type ActionResult uint8

const (
	// ActionApplied: the action's row was inserted; apply its effect in the same transaction.
	ActionApplied ActionResult = iota + 1
	// ActionAlreadyApplied: a row with the action's key exists (MySQL 1062 on the action key): another
	// message, a compensation job or an earlier delivery applied it; apply nothing.
	ActionAlreadyApplied
)

// String returns "applied" or "already applied", or ActionResult(n) for any other value.
func (r ActionResult) String() string {
	switch r {
	case ActionApplied:
		return "applied"
	case ActionAlreadyApplied:
		return "already applied"
	}
	return fmt.Sprintf("ActionResult(%d)", uint8(r))
}

// ActionTable names a table of business actions keyed by an action ID (inventory_change.change_id,
// account_transaction.transaction_id). Every name must be a plain SQL identifier: 1..64 ASCII
// letters, digits and '_', not starting with a digit.
type ActionTable struct {
	// Table is the table's name. Required.
	Table string
	// KeyColumn is the action ID column. Required.
	KeyColumn string
	// KeyName is the name of the unique key on KeyColumn as MySQL reports it in error 1062, compared
	// without case (index names are case-insensitive in MySQL). Default "PRIMARY" (KeyColumn is the
	// primary key); give the unique key's name when KeyColumn has one of its own.
	KeyName string
}

// Actions records business actions in one ActionTable. It holds no connection and is safe for
// concurrent use.
type Actions struct {
	t      ActionTable
	insert string // INSERT INTO table (key — Record appends the other columns
}

// NewActions applies the default of t (KeyName "PRIMARY"), validates it and returns its recorder. An
// invalid name returns an error naming the field, e.g. "dedup: action table: KeyColumn: …".
func NewActions(t ActionTable) (*Actions, error) {
	if t.KeyName == "" {
		t.KeyName = "PRIMARY"
	}
	for _, f := range []struct{ field, name string }{
		{"Table", t.Table}, {"KeyColumn", t.KeyColumn}, {"KeyName", t.KeyName},
	} {
		if err := dedupsql.ValidIdentifier(f.name); err != nil {
			return nil, fmt.Errorf("dedup: action table: %s: %w", f.field, err)
		}
	}
	return &Actions{t: t, insert: "INSERT INTO " + quote(t.Table) + " (" + quote(t.KeyColumn)}, nil
}

// Record inserts the action row (KeyColumn = id, plus columns, in name order) in tx (a message's dedup
// transaction, or a job's own); apply the action's effect in tx only when it returns ActionApplied. A 1062
// on KeyName is ActionAlreadyApplied and no error (the package doc, "Actions"). Errors: a 1062 on another
// key, and any other database error, wrapped with the table and id; an empty id or an invalid, key or twice
// named column, retry.Permanent.
func (a *Actions) Record(ctx context.Context, tx *sqlx.Tx, id string, columns map[string]any) (ActionResult, error) {
	if err := a.check(id, columns); err != nil {
		return 0, retry.Permanent(fmt.Errorf("dedup: record action %q in %s: %w", id, a.t.Table, err))
	}
	query, args := a.statement(id, columns)
	_, err := tx.ExecContext(ctx, query, args...)
	if key, dup := mysqlerr.DuplicateKey(err); dup {
		if strings.EqualFold(key, a.t.KeyName) { // MySQL index names are case-insensitive
			return ActionAlreadyApplied, nil
		}
		return 0, fmt.Errorf("dedup: record action %q in %s: duplicate on key %q, not the action key %q: %w",
			id, a.t.Table, key, a.t.KeyName, err)
	}
	if err != nil {
		return 0, fmt.Errorf("dedup: record action %q in %s: %w", id, a.t.Table, err)
	}
	return ActionApplied, nil
}

// check validates one Record call.
func (a *Actions) check(id string, columns map[string]any) error {
	if id == "" {
		return errors.New("the action ID is empty")
	}
	if col := namedTwice(columns); col != "" {
		return fmt.Errorf("columns: %q is named twice (column names are case-insensitive)", col)
	}
	for col := range columns {
		if err := dedupsql.ValidIdentifier(col); err != nil {
			return fmt.Errorf("columns: %w", err)
		}
		if strings.EqualFold(col, a.t.KeyColumn) {
			return fmt.Errorf("columns: %q is the key column, which Record sets to the action ID", col)
		}
	}
	return nil
}

// statement returns the INSERT of one action and its arguments.
func (a *Actions) statement(id string, columns map[string]any) (string, []any) {
	cols := make([]string, 0, len(columns))
	for col := range columns {
		cols = append(cols, col)
	}
	slices.Sort(cols)
	var b strings.Builder
	b.WriteString(a.insert)
	args := make([]any, 0, 1+len(cols))
	args = append(args, id)
	for _, col := range cols {
		b.WriteString(", " + quote(col))
		args = append(args, columns[col])
	}
	b.WriteString(") VALUES (?" + strings.Repeat(", ?", len(cols)) + ")")
	return b.String(), args
}
