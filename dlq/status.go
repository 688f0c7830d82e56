package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
)

// AuditReader reads the replay audit; an Audit (MySQLAudit) is one.
type AuditReader interface {
	// Lookup returns the row of group's letter storeID; found is false when there is none.
	Lookup(ctx context.Context, group, storeID string) (rec AuditRecord, found bool, err error)
}

// LetterStatus is what is known of a letter's replay: the audit row of its last replay, and whether the
// group's dedup scope has processed its event.
type LetterStatus struct {
	// Replay is the letter's audit row (when, by whom, which run, sent or not); nil when no replay claimed it.
	Replay *AuditRecord
	// Processed reports that the dedup scope holds a row for the letter's event ID: after a sent replay,
	// the replay took effect; without one, another message of the event did (a replay would be skipped).
	// Always false for a letter without an event ID.
	Processed bool
}

// Waiting reports whether the letter still waits for an operator: no replay has sent it and its event
// has not been processed. A failed or uncertain replay ("failed", "sending") leaves it waiting.
func (s LetterStatus) Waiting() bool {
	return !s.Processed && (s.Replay == nil || s.Replay.Status != AuditSent)
}

// StatusOptions say where a letter's status is read.
type StatusOptions struct {
	// Group is the consumer group whose letters they are (without namespace). Required.
	Group string
	// Namespace is the group's RocketMQ namespace ("" = none); the audit keys rows by the group in it.
	Namespace string
	// Scope is the dedup scope of the processed check (dedup.WithScope); default Group.
	Scope string
	// Audit reads the replay audit. Required.
	Audit AuditReader
	// Processed answers the processed check. Required.
	Processed ProcessedChecker
}

// validate names the first missing field.
func (o StatusOptions) validate() error {
	switch {
	case o.Group == "":
		return errors.New("dlq: status: Group is required")
	case o.Audit == nil:
		return errors.New("dlq: status: Audit is required")
	case o.Processed == nil:
		return errors.New("dlq: status: Processed is required")
	}
	return nil
}

// Statuses returns the status of each letter, in order: its audit row (looked up by StoreID, as Replay
// records it) and the processed check of its event ID. Two queries per letter. Errors: invalid options;
// the first lookup that fails, wrapped with the letter's store ID.
func Statuses(ctx context.Context, letters []Letter, opts StatusOptions) ([]LetterStatus, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	scope := opts.Scope
	if scope == "" {
		scope = opts.Group
	}
	group := consumer.InNamespace(opts.Namespace, opts.Group)
	out := make([]LetterStatus, len(letters))
	for i, l := range letters {
		rec, found, err := opts.Audit.Lookup(ctx, group, l.StoreID)
		if err != nil {
			return nil, fmt.Errorf("dlq: status of %s: %w", l.StoreID, err)
		}
		if found {
			out[i].Replay = &rec
		}
		if l.EventID == "" {
			continue
		}
		if out[i].Processed, err = opts.Processed.Processed(ctx, scope, l.EventID); err != nil {
			return nil, fmt.Errorf("dlq: status of %s: %w", l.StoreID, err)
		}
	}
	return out, nil
}
