package dlqtool

import (
	"context"
	"time"
)

// AuditStatus is the state of a letter's replay in the audit.
type AuditStatus string

// The audit states. A row is claimed as AuditSending before the send and set to AuditSent or AuditFailed
// after it; a row that stays AuditSending belongs to a replay that stopped in between.
const (
	AuditSending AuditStatus = "sending"
	AuditSent    AuditStatus = "sent"
	AuditFailed  AuditStatus = "failed"
)

// AuditRecord is one row of the replay audit: the last replay of one letter of one consumer group.
type AuditRecord struct {
	// Group and StoreID (Letter.StoreID) key the row.
	Group, StoreID string
	// ReplayID is the run that claimed the row last.
	ReplayID string
	// DLQMsgID, EventID and OriginTopic describe the letter; TargetTopic is the topic the replay was
	// presented on.
	DLQMsgID, EventID, OriginTopic, TargetTopic string
	// SentMsgID is the replay's message ID once sent.
	SentMsgID string
	// Status is the replay's state; Error the send error of a failed one.
	Status AuditStatus
	Error  string
	// ReplayedAt is when the row was last claimed (the database's UTC clock); set by the store.
	ReplayedAt time.Time
	// ReplayedBy is the operator of that replay.
	ReplayedBy string
	// EditedBy is set on the row of an edited replay (ReplayEdited): the operator who wrote EditedBody,
	// sent instead of OriginalBody (the letter's), at EditedAt (the database's UTC clock; set by the store).
	EditedBy                 string
	EditedAt                 time.Time
	OriginalBody, EditedBody []byte
}

// Superseded reports whether the row is an edited replay's: the edited copy replaced the letter, which is
// never replayed as it is (the package doc, "Edit, then replay").
func (r AuditRecord) Superseded() bool { return r.EditedBy != "" }

// Audit records which letters were replayed. Claims must be atomic across processes: two replays that
// claim the same letter at once must not both win (mysqlAudit: the primary key and a conditional UPDATE).
type Audit interface {
	// Lookup returns the row of group's letter storeID; found is false when there is none.
	Lookup(ctx context.Context, group, storeID string) (rec AuditRecord, found bool, err error)
	// Claim records rec (status AuditSending) before a send. With prev nil it inserts and loses (false)
	// when a row exists; with prev, the row found by Lookup, it takes the row over only if it is still
	// prev (same replay ID and status), and a plain replay (EditedBy "") never takes over an edited row.
	// An edit's claim writes its bodies and editor in the same statement. won reports whether this replay may send.
	Claim(ctx context.Context, rec AuditRecord, prev *AuditRecord) (won bool, err error)
	// Finish sets the row claimed by rec.ReplayID to rec.Status with rec.SentMsgID and rec.Error.
	Finish(ctx context.Context, rec AuditRecord) error
}
