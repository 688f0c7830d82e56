package dlqtool

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// AuditTable is the replay audit table (created by dlq.Migrate).
const AuditTable = "dlq_replay"

// mysqlDuplicateEntry is MySQL's ER_DUP_ENTRY.
const mysqlDuplicateEntry = 1062

// maxAuditError is the length of the error column.
const maxAuditError = 1024

// mysqlAudit is the Audit on a MySQL or MariaDB database holding AuditTable.
type mysqlAudit struct{ db *sqlx.DB }

// NewMySQLAudit returns the audit on db; the table must exist (dlq.Migrate). Error: db is nil.
func NewMySQLAudit(db *sqlx.DB) (Audit, error) {
	if db == nil {
		return nil, errors.New("dlq: NewMySQLAudit: db is nil")
	}
	return &mysqlAudit{db: db}, nil
}

type auditRow struct {
	Group       string       `db:"consumer_group"`
	StoreID     string       `db:"dlq_store_id"`
	ReplayID    string       `db:"replay_id"`
	DLQMsgID    string       `db:"dlq_msg_id"`
	EventID     string       `db:"event_id"`
	OriginTopic string       `db:"origin_topic"`
	TargetTopic string       `db:"target_topic"`
	SentMsgID   string       `db:"sent_msg_id"`
	Status      string       `db:"status"`
	Error       string       `db:"error"`
	ReplayedAt  sql.NullTime `db:"replayed_at"`
	ReplayedBy  string       `db:"replayed_by"`
	EditedBy    string       `db:"edited_by"`
	EditedAt    sql.NullTime `db:"edited_at"`
	Original    []byte       `db:"original_body"`
	Edited      []byte       `db:"edited_body"`
}

// auditColumns are the columns of an auditRow.
const auditColumns = `consumer_group, dlq_store_id, replay_id, dlq_msg_id, event_id, origin_topic, target_topic,
	sent_msg_id, status, error, replayed_at, replayed_by, edited_by, edited_at, original_body, edited_body`

// auditColumnsBeforeEdits read an auditRow from a table not yet migrated for edits (the audit schema's
// migration 2, which the reading commands and an older consumer's dlq.Migrate do not apply): no row is an edit.
const auditColumnsBeforeEdits = `consumer_group, dlq_store_id, replay_id, dlq_msg_id, event_id, origin_topic, target_topic,
	sent_msg_id, status, error, replayed_at, replayed_by, '' AS edited_by, NULL AS edited_at, NULL AS original_body,
	NULL AS edited_body`

// mysqlBadField is MySQL's ER_BAD_FIELD_ERROR (1054), an unknown column.
const mysqlBadField = 1054

// read runs the query that query builds with auditColumns, and again with auditColumnsBeforeEdits when
// the table lacks the edit columns.
func read(query func(columns string) error) error {
	err := query(auditColumns)
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == mysqlBadField {
		return query(auditColumnsBeforeEdits)
	}
	return err
}

// record is the AuditRecord of a row.
func (r auditRow) record() AuditRecord {
	rec := AuditRecord{Group: r.Group, StoreID: r.StoreID, ReplayID: r.ReplayID, DLQMsgID: r.DLQMsgID,
		EventID: r.EventID, OriginTopic: r.OriginTopic, TargetTopic: r.TargetTopic, SentMsgID: r.SentMsgID,
		Status: AuditStatus(r.Status), Error: r.Error, ReplayedAt: r.ReplayedAt.Time.UTC(), ReplayedBy: r.ReplayedBy,
		EditedBy: r.EditedBy, OriginalBody: r.Original, EditedBody: r.Edited}
	if r.EditedAt.Valid {
		rec.EditedAt = r.EditedAt.Time.UTC()
	}
	return rec
}

// Lookup implements Audit.
func (a *mysqlAudit) Lookup(ctx context.Context, group, storeID string) (AuditRecord, bool, error) {
	var r auditRow
	err := read(func(columns string) error {
		return a.db.GetContext(ctx, &r, `SELECT `+columns+` FROM `+AuditTable+`
			WHERE consumer_group = ? AND dlq_store_id = ?`, group, storeID)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return AuditRecord{}, false, nil
	}
	if err != nil {
		return AuditRecord{}, false, fmt.Errorf("dlq: audit lookup %s/%s: %w", group, storeID, err)
	}
	return r.record(), true, nil
}

// lookupMany implements batchAudit: the rows of group's letters storeIDs, by store ID, a query per
// maxInList of them.
func (a *mysqlAudit) lookupMany(ctx context.Context, group string, storeIDs []string) (map[string]AuditRecord, error) {
	out := make(map[string]AuditRecord, len(storeIDs))
	err := inChunks(storeIDs, func(chunk []string) error {
		var rows []auditRow
		err := read(func(columns string) error {
			q, args, err := sqlx.In(`SELECT `+columns+` FROM `+AuditTable+`
				WHERE consumer_group = ? AND dlq_store_id IN (?)`, group, chunk)
			if err != nil {
				return err
			}
			return a.db.SelectContext(ctx, &rows, a.db.Rebind(q), args...)
		})
		if err != nil {
			return err
		}
		for _, r := range rows {
			out[r.StoreID] = r.record()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: audit lookup of %d letters of %s: %w", len(storeIDs), group, err)
	}
	return out, nil
}

// maxInList is the most values in one IN list of a batched status query.
const maxInList = 500

// inChunks calls f with ids in chunks of at most maxInList, and stops at its first error.
func inChunks(ids []string, f func([]string) error) error {
	for len(ids) > 0 {
		n := min(len(ids), maxInList)
		if err := f(ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// Claim implements Audit: an INSERT that a 1062 loses, or with prev an UPDATE conditioned on prev's
// replay ID and status (and, for a plain replay, on the row not being an edit's). An edit's claim sets
// edited_at to the database's clock and its bodies in the same statement.
func (a *mysqlAudit) Claim(ctx context.Context, rec AuditRecord, prev *AuditRecord) (bool, error) {
	// edited_at is NULL for a plain replay, the claim's time for an edit.
	editedAt := `IF(? = '', NULL, UTC_TIMESTAMP(6))`
	var original, edited any // NULL for a plain replay
	if rec.Superseded() {
		original, edited = nonNil(rec.OriginalBody), nonNil(rec.EditedBody)
	}
	if prev == nil {
		_, err := a.db.ExecContext(ctx, `INSERT INTO `+AuditTable+` (consumer_group, dlq_store_id, replay_id,
			dlq_msg_id, event_id, origin_topic, target_topic, status, replayed_at, replayed_by,
			edited_by, edited_at, original_body, edited_body)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?, ?, `+editedAt+`, ?, ?)`, rec.Group, rec.StoreID, rec.ReplayID,
			rec.DLQMsgID, rec.EventID, rec.OriginTopic, rec.TargetTopic, string(AuditSending), rec.ReplayedBy,
			rec.EditedBy, rec.EditedBy, original, edited)
		var myErr *mysql.MySQLError
		if errors.As(err, &myErr) && myErr.Number == mysqlDuplicateEntry {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("dlq: audit claim %s/%s: %w", rec.Group, rec.StoreID, err)
		}
		return true, nil
	}
	res, err := a.db.ExecContext(ctx, `UPDATE `+AuditTable+` SET replay_id = ?, dlq_msg_id = ?, event_id = ?,
		origin_topic = ?, target_topic = ?, sent_msg_id = '', status = ?, error = '', claims = claims + 1,
		replayed_at = UTC_TIMESTAMP(6), replayed_by = ?,
		edited_by = ?, edited_at = `+editedAt+`, original_body = ?, edited_body = ?
		WHERE consumer_group = ? AND dlq_store_id = ? AND replay_id = ? AND status = ? AND (? <> '' OR edited_by = '')`,
		rec.ReplayID, rec.DLQMsgID, rec.EventID, rec.OriginTopic, rec.TargetTopic, string(AuditSending),
		rec.ReplayedBy, rec.EditedBy, rec.EditedBy, original, edited,
		rec.Group, rec.StoreID, prev.ReplayID, string(prev.Status), rec.EditedBy)
	if err != nil {
		return false, fmt.Errorf("dlq: audit re-claim %s/%s: %w", rec.Group, rec.StoreID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("dlq: audit re-claim %s/%s: rows affected: %w", rec.Group, rec.StoreID, err)
	}
	return n == 1, nil
}

// nonNil returns b, or an empty slice for nil: the driver writes a nil []byte as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Finish implements Audit. Error: the row is no longer claimed by rec.ReplayID (a forced replay took it over).
func (a *mysqlAudit) Finish(ctx context.Context, rec AuditRecord) error {
	msg := rec.Error
	if len(msg) > maxAuditError {
		msg = msg[:maxAuditError]
	}
	res, err := a.db.ExecContext(ctx, `UPDATE `+AuditTable+` SET status = ?, sent_msg_id = ?, error = ?
		WHERE consumer_group = ? AND dlq_store_id = ? AND replay_id = ?`,
		string(rec.Status), rec.SentMsgID, msg, rec.Group, rec.StoreID, rec.ReplayID)
	if err != nil {
		return fmt.Errorf("dlq: audit finish %s/%s: %w", rec.Group, rec.StoreID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("dlq: audit finish %s/%s: row no longer claimed by replay %s (rows %d, %v)", rec.Group, rec.StoreID, rec.ReplayID, n, err)
	}
	return nil
}

// mysqlProcessed is the ProcessedChecker on the dedup schema's processed_event table.
type mysqlProcessed struct{ db *sqlx.DB }

// NewMySQLProcessed returns the checker on db, which holds the dedup schema's processed_event table. Error: db is nil.
func NewMySQLProcessed(db *sqlx.DB) (ProcessedChecker, error) {
	if db == nil {
		return nil, errors.New("dlq: NewMySQLProcessed: db is nil")
	}
	return &mysqlProcessed{db: db}, nil
}

// Processed reports whether scope has a row for eventID, i.e. processed it (the row commits with the
// handler's effects, so a row is a processed event).
func (p *mysqlProcessed) Processed(ctx context.Context, scope, eventID string) (bool, error) {
	var n int
	if err := p.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM `+dedupsql.ProcessedTable+` WHERE consumer_group = ? AND event_id = ?`, scope, eventID); err != nil {
		return false, fmt.Errorf("dlq: processed check %s/%s: %w", scope, eventID, err)
	}
	return n > 0, nil
}

// processedMany implements batchProcessed: the event IDs among eventIDs that scope has processed, a query
// per maxInList of them.
func (p *mysqlProcessed) processedMany(ctx context.Context, scope string, eventIDs []string) (map[string]bool, error) {
	out := make(map[string]bool, len(eventIDs))
	err := inChunks(eventIDs, func(chunk []string) error {
		q, args, err := sqlx.In(`SELECT event_id FROM `+dedupsql.ProcessedTable+` WHERE consumer_group = ? AND event_id IN (?)`, scope, chunk)
		if err != nil {
			return err
		}
		var done []string
		if err := p.db.SelectContext(ctx, &done, p.db.Rebind(q), args...); err != nil {
			return err
		}
		for _, id := range done {
			out[id] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: processed check of %d events in %s: %w", len(eventIDs), scope, err)
	}
	return out, nil
}
