package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
)

// LedgerTable is the append-only effect log of the tests, in the test database. It has no unique key on
// (run, event_id): every apply of an event adds a row, so an event applied twice shows two rows. The shop
// tables cannot show that: their primary keys turn a second apply into a 1062 and a retry, so a count of
// orders is capped at one per event whatever the dedup does.
const LedgerTable = "test_effect_ledger"

const ledgerDDL = `CREATE TABLE IF NOT EXISTS ` + LedgerTable + ` (
	id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
	run        VARCHAR(64)     NOT NULL,
	event_id   VARCHAR(128)    NOT NULL,
	applied_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
	PRIMARY KEY (id),
	KEY ledger_run_event (run, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// Ledger appends one row per applied event of one test run to LedgerTable, through the handler's dedup
// transaction, and counts them. Build it with NewLedger.
type Ledger struct {
	db  *sqlx.DB
	run string
}

// NewLedger creates LedgerTable if it is missing and returns the ledger of run (a unique prefix of the
// test, e.g. from Unique; at most 64 characters). Rows of other runs are never read or deleted.
func NewLedger(t testing.TB, db *sqlx.DB, run string) *Ledger {
	t.Helper()
	if _, err := db.Exec(ledgerDDL); err != nil {
		t.Fatalf("create %s: %v", LedgerTable, err)
	}
	return &Ledger{db: db, run: run}
}

// Append writes one ledger row for eventID through tx: it commits with the dedup row and the business
// writes, or not at all. Errors are the driver's, wrapped.
func (l *Ledger) Append(ctx context.Context, tx *sqlx.Tx, eventID string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+LedgerTable+` (run, event_id) VALUES (?, ?)`, l.run, eventID); err != nil {
		return fmt.Errorf("ledger: append %s: %w", eventID, err)
	}
	return nil
}

// Handler runs h and, when it returns consumer.Processed without error, appends the delivery's event ID
// to the ledger in the same transaction. h runs under a savepoint: if it fails with a 1062 on a business
// key — its effect is already there, so this is a second apply of the event — its partial writes are
// rolled back to the savepoint and the apply is recorded anyway (Processed), so that the double apply
// shows as a second ledger row instead of as a retry. Do not use it where a business 1062 is the point of
// the test (F14).
func (l *Ledger) Handler(h dedup.TxHandler) dedup.TxHandler {
	return func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT ledger_business_writes`); err != nil {
			return consumer.Outcome{}, fmt.Errorf("ledger: savepoint: %w", err)
		}
		o, err := h(ctx, tx, d)
		if _, dup := mysqlerr.DuplicateKey(err); dup {
			if _, rbErr := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT ledger_business_writes`); rbErr != nil {
				return consumer.Outcome{}, fmt.Errorf("ledger: rollback to savepoint after %v: %w", err, rbErr)
			}
			o, err = consumer.Processed(), nil
		}
		if err != nil || o.Kind != consumer.KindProcessed {
			return o, err
		}
		return o, l.Append(ctx, tx, d.EventID)
	}
}

// Count returns the number of ledger rows of eventID in this run: how many times it was applied.
func (l *Ledger) Count(t testing.TB, eventID string) int {
	t.Helper()
	var n int
	if err := l.db.Get(&n, `SELECT COUNT(*) FROM `+LedgerTable+` WHERE run = ? AND event_id = ?`, l.run, eventID); err != nil {
		t.Fatalf("ledger: count %s: %v", eventID, err)
	}
	return n
}

// Totals returns the number of distinct events applied in this run and the number of ledger rows; they
// are equal when no event was applied twice.
func (l *Ledger) Totals(t testing.TB) (events, rows int) {
	t.Helper()
	var got struct {
		Events int `db:"events"`
		Rows   int `db:"applies"`
	}
	if err := l.db.Get(&got, `SELECT COUNT(DISTINCT event_id) AS events, COUNT(*) AS applies FROM `+LedgerTable+` WHERE run = ?`, l.run); err != nil {
		t.Fatalf("ledger: totals: %v", err)
	}
	return got.Events, got.Rows
}

// Repeated returns the events of this run applied more than once, with their number of applies; empty
// when every event took effect at most once.
func (l *Ledger) Repeated(t testing.TB) map[string]int {
	t.Helper()
	var rows []struct {
		EventID string `db:"event_id"`
		N       int    `db:"n"`
	}
	if err := l.db.Select(&rows, `SELECT event_id, COUNT(*) AS n FROM `+LedgerTable+`
		WHERE run = ? GROUP BY event_id HAVING COUNT(*) > 1`, l.run); err != nil {
		t.Fatalf("ledger: repeated: %v", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.EventID] = r.N
	}
	return out
}

// RequireOncePerEvent fails the test unless exactly want distinct events of this run were applied, each
// exactly once.
func (l *Ledger) RequireOncePerEvent(t testing.TB, want int) {
	t.Helper()
	events, rows := l.Totals(t)
	if events != want || rows != want {
		t.Fatalf("ledger: %d events applied in %d applies, want %d events once each; applied more than once: %v",
			events, rows, want, l.Repeated(t))
	}
}
