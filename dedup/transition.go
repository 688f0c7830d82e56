package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/retry"
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

// String returns the result's name in lower case ("applied", "stale", "illegal", "ahead", "missing"), or
// TransitionResult(n) for a value that is none of them (the zero value among them).
func (r TransitionResult) String() string {
	switch r {
	case TransitionApplied:
		return "applied"
	case TransitionStale:
		return "stale"
	case TransitionIllegal:
		return "illegal"
	case TransitionAhead:
		return "ahead"
	case TransitionMissing:
		return "missing"
	}
	return fmt.Sprintf("TransitionResult(%d)", uint8(r))
}

// StateTable names a table whose rows carry a status and a version column: an aggregate with a state
// machine (an order: WAIT_PAY → PAID). Every name must be a plain SQL identifier (as in ActionTable); the
// three columns must be distinct. KeyColumn must be unique in the table (its primary key or a unique key).
type StateTable struct {
	// Table is the table's name, e.g. "orders". Required.
	Table string
	// KeyColumn is the row's key column, e.g. "order_no". Required.
	KeyColumn string
	// StatusColumn holds the status, a string column. Default "status".
	StatusColumn string
	// VersionColumn holds the version, a BIGINT that moves up by one per applied event. Default "version".
	VersionColumn string
}

// Transition is one event's move of one row.
type Transition struct {
	// Key is the row's key value. Required (not nil).
	Key any
	// From lists the statuses the event may move the row from. At least one, none empty.
	From []string
	// To is the status the row moves to. Not empty.
	To string
	// Version is the event's version: the row must be at Version-1 and is set to Version (Delivery.Version
	// when middleware.Version runs). At least 1.
	Version int64
	// Set holds further columns to set in the same UPDATE (e.g. "paid_at"); names must be plain SQL identifiers
	// and must not be the key, status or version column.
	Set map[string]any
}

// States runs conditional transitions on one StateTable. It holds no connection and is safe for
// concurrent use.
type States struct {
	t StateTable
	// SQL text built once by NewStates; Transition appends the Set columns and the From placeholders.
	update string // UPDATE t SET status = ?, version = ?
	where  string // WHERE key = ? AND version = ? AND status IN (
	probe  string // SELECT status, version … FOR UPDATE
	load   string // SELECT version … (no lock)
}

// NewStates applies the defaults of t (StatusColumn "status", VersionColumn "version"), validates it and
// returns its transition runner. An invalid name returns an error naming the field, e.g.
// "dedup: state table: KeyColumn: …", and so do two fields naming one column.
func NewStates(t StateTable) (*States, error) {
	if t.StatusColumn == "" {
		t.StatusColumn = "status"
	}
	if t.VersionColumn == "" {
		t.VersionColumn = "version"
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	tbl, key, st, ver := quote(t.Table), quote(t.KeyColumn), quote(t.StatusColumn), quote(t.VersionColumn)
	return &States{
		t:      t,
		update: "UPDATE " + tbl + " SET " + st + " = ?, " + ver + " = ?",
		where:  " WHERE " + key + " = ? AND " + ver + " = ? AND " + st + " IN (",
		probe:  "SELECT " + st + ", " + ver + " FROM " + tbl + " WHERE " + key + " = ? FOR UPDATE",
		load:   "SELECT " + ver + " FROM " + tbl + " WHERE " + key + " = ?",
	}, nil
}

func (t StateTable) validate() error {
	for _, f := range []struct{ field, name string }{
		{"Table", t.Table}, {"KeyColumn", t.KeyColumn}, {"StatusColumn", t.StatusColumn}, {"VersionColumn", t.VersionColumn},
	} {
		if err := dedupsql.ValidIdentifier(f.name); err != nil {
			return fmt.Errorf("dedup: state table: %s: %w", f.field, err)
		}
	}
	// MySQL column names are case-insensitive: "Status" and "status" are one column.
	switch {
	case strings.EqualFold(t.StatusColumn, t.KeyColumn):
		return fmt.Errorf("dedup: state table: StatusColumn: %w: %q is also the KeyColumn", dedupsql.ErrInvalidIdentifier, t.StatusColumn)
	case strings.EqualFold(t.VersionColumn, t.KeyColumn):
		return fmt.Errorf("dedup: state table: VersionColumn: %w: %q is also the KeyColumn", dedupsql.ErrInvalidIdentifier, t.VersionColumn)
	case strings.EqualFold(t.VersionColumn, t.StatusColumn):
		return fmt.Errorf("dedup: state table: VersionColumn: %w: %q is also the StatusColumn", dedupsql.ErrInvalidIdentifier, t.VersionColumn)
	}
	return nil
}

// Transition runs tr in tx (the dedup transaction, or a job's own) as one conditional UPDATE; one row changed
// is TransitionApplied, and zero rows one SELECT … FOR UPDATE more that tells TransitionStale, Ahead, Illegal
// or Missing (the package doc, "Transitions"). Only TransitionApplied wrote anything. Errors: an invalid tr,
// retry.Permanent; database errors wrapped with the table and key; a row that changed between the two
// statements, retry.Transient.
func (s *States) Transition(ctx context.Context, tx *sqlx.Tx, tr Transition) (TransitionResult, error) {
	if err := s.check(tr); err != nil {
		return 0, retry.Permanent(fmt.Errorf("dedup: transition %s key %v: %w", s.t.Table, tr.Key, err))
	}
	query, args := s.statement(tr)
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("dedup: transition %s key %v to %s v%d: %w", s.t.Table, tr.Key, tr.To, tr.Version, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("dedup: transition %s key %v: rows affected: %w", s.t.Table, tr.Key, err)
	}
	// go-sql-driver/mysql reports CHANGED rows unless the DSN sets clientFoundRows=true, and a matched row
	// whose values stay the same is not counted as changed. Here the version always changes (Version-1 →
	// Version), so a matched row is a changed row and 1 means applied with either setting.
	switch n {
	case 1:
		return TransitionApplied, nil
	case 0:
		return s.diagnose(ctx, tx, tr)
	}
	return 0, fmt.Errorf("dedup: transition %s key %v: %d rows moved, %s is not unique", s.t.Table, tr.Key, n, s.t.KeyColumn)
}

// check validates tr against the table.
func (s *States) check(tr Transition) error {
	switch {
	case tr.Key == nil:
		return errors.New("Key is nil")
	case len(tr.From) == 0:
		return errors.New("From lists no status")
	case slices.Contains(tr.From, ""):
		return errors.New("From holds an empty status")
	case tr.To == "":
		return errors.New("To is empty")
	case tr.Version < 1:
		return fmt.Errorf("Version %d is below 1", tr.Version)
	}
	if col := namedTwice(tr.Set); col != "" {
		return fmt.Errorf("Set: %q is named twice (column names are case-insensitive)", col)
	}
	for col := range tr.Set {
		if err := dedupsql.ValidIdentifier(col); err != nil {
			return fmt.Errorf("Set: %w", err)
		}
		for _, reserved := range []string{s.t.KeyColumn, s.t.StatusColumn, s.t.VersionColumn} {
			if strings.EqualFold(col, reserved) {
				return fmt.Errorf("Set: %q is the key, status or version column, which the transition sets itself", col)
			}
		}
	}
	return nil
}

// statement returns the UPDATE of tr and its arguments; Set columns in name order, so that one
// transition always has one SQL text.
func (s *States) statement(tr Transition) (string, []any) {
	cols := make([]string, 0, len(tr.Set))
	for col := range tr.Set {
		cols = append(cols, col)
	}
	slices.Sort(cols)
	var b strings.Builder
	b.WriteString(s.update)
	args := make([]any, 0, 4+len(cols)+len(tr.From))
	args = append(args, tr.To, tr.Version)
	for _, col := range cols {
		b.WriteString(", " + quote(col) + " = ?")
		args = append(args, tr.Set[col])
	}
	b.WriteString(s.where)
	args = append(args, tr.Key, tr.Version-1)
	for i, from := range tr.From {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		args = append(args, from)
	}
	b.WriteString(")")
	return b.String(), args
}

// diagnose reads the row the UPDATE did not move, locking it so the answer holds until tx ends, and says why.
func (s *States) diagnose(ctx context.Context, tx *sqlx.Tx, tr Transition) (TransitionResult, error) {
	var status sql.NullString
	var version int64
	err := tx.QueryRowxContext(ctx, s.probe, tr.Key).Scan(&status, &version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return TransitionMissing, nil
	case err != nil:
		return 0, fmt.Errorf("dedup: transition %s key %v: read the unmoved row: %w", s.t.Table, tr.Key, err)
	case version >= tr.Version:
		return TransitionStale, nil
	case version < tr.Version-1:
		return TransitionAhead, nil
	case !status.Valid || !slices.Contains(tr.From, status.String):
		return TransitionIllegal, nil
	}
	return 0, retry.Transient(fmt.Errorf("dedup: transition %s key %v: the row reached %s v%d after the update missed it",
		s.t.Table, tr.Key, status.String, version))
}
