package dlqtool

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// LetterStatus is what is known of a letter's replay: the audit row of its last replay, and whether the
// group's dedup scope has processed its event.
type LetterStatus struct {
	// Replay is the letter's audit row (when, by whom, which run, sent or not); nil when no replay claimed it.
	Replay *AuditRecord
	// Processed reports that the dedup scope holds a row for the letter's event ID, or for the event ID a
	// sent replay recorded (a letter replayed from an edited export file): after a sent replay, the replay
	// took effect; without one, another message of the event did (a replay would be skipped). Always false
	// for a letter without an event ID that no sent replay gave one.
	Processed bool
}

// waiting reports whether the letter still waits for an operator: no replay has sent it and its event
// has not been processed. A failed or uncertain replay ("failed", "sending") leaves it waiting.
func (s LetterStatus) waiting() bool {
	return !s.Processed && (s.Replay == nil || s.Replay.Status != AuditSent)
}

// Waiting reports whether the letter still waits for an operator, as TakeCensus counts it.
func (s LetterStatus) Waiting() bool { return s.waiting() }

// StatusOptions say where a letter's status is read.
type StatusOptions struct {
	// Group is the consumer group whose letters they are (without namespace). Required.
	Group string
	// Namespace is the group's RocketMQ namespace ("" = none); the audit keys rows by the group in it.
	Namespace string
	// Scope is the dedup scope of the processed check (dedup.WithScope); default Group.
	Scope string
	// Audit reads the replay audit. Required.
	Audit Audit
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
// records it) and the processed check of its event ID. With mysqlAudit and mysqlProcessed it reads them a
// few hundred letters per query; with other implementations, two lookups per letter. Errors: invalid
// options; the first lookup that fails, wrapped with the letter's store ID (or the batch's size).
func Statuses(ctx context.Context, letters []Letter, opts StatusOptions) ([]LetterStatus, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	scope := opts.Scope
	if scope == "" {
		scope = opts.Group
	}
	group := rmq.InNamespace(opts.Namespace, opts.Group)
	replays, err := lookupReplays(ctx, opts.Audit, group, letters)
	if err != nil {
		return nil, err
	}
	events := make([][]string, len(letters)) // the event IDs whose processing counts for each letter
	for i, l := range letters {
		if l.EventID != "" {
			events[i] = append(events[i], l.EventID)
		}
		if rec, found := replays[l.StoreID]; found && rec.Status == AuditSent && rec.EventID != "" && rec.EventID != l.EventID {
			events[i] = append(events[i], rec.EventID)
		}
	}
	done, err := checkProcessed(ctx, opts.Processed, scope, events)
	if err != nil {
		return nil, err
	}
	out := make([]LetterStatus, len(letters))
	for i, l := range letters {
		if rec, found := replays[l.StoreID]; found {
			out[i].Replay = &rec
		}
		for _, id := range events[i] {
			out[i].Processed = out[i].Processed || done[id]
		}
	}
	return out, nil
}

// batchAudit is an Audit that reads many rows in one query (mysqlAudit).
type batchAudit interface {
	lookupMany(ctx context.Context, group string, storeIDs []string) (map[string]AuditRecord, error)
}

// batchProcessed is a ProcessedChecker that checks many events in one query (mysqlProcessed).
type batchProcessed interface {
	processedMany(ctx context.Context, scope string, eventIDs []string) (map[string]bool, error)
}

// lookupReplays returns the audit rows of group's letters, by store ID.
func lookupReplays(ctx context.Context, audit Audit, group string, letters []Letter) (map[string]AuditRecord, error) {
	if b, ok := audit.(batchAudit); ok {
		ids := make([]string, len(letters))
		for i, l := range letters {
			ids[i] = l.StoreID
		}
		return b.lookupMany(ctx, group, ids)
	}
	out := map[string]AuditRecord{}
	for _, l := range letters {
		rec, found, err := audit.Lookup(ctx, group, l.StoreID)
		if err != nil {
			return nil, fmt.Errorf("dlq: status of %s: %w", l.StoreID, err)
		}
		if found {
			out[l.StoreID] = rec
		}
	}
	return out, nil
}

// checkProcessed returns which of the event IDs in events scope has processed.
func checkProcessed(ctx context.Context, processed ProcessedChecker, scope string, events [][]string) (map[string]bool, error) {
	var ids []string
	seen := map[string]bool{}
	for _, e := range events {
		for _, id := range e {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	if b, ok := processed.(batchProcessed); ok {
		return b.processedMany(ctx, scope, ids)
	}
	out := map[string]bool{}
	for _, id := range ids {
		done, err := processed.Processed(ctx, scope, id)
		if err != nil {
			return nil, fmt.Errorf("dlq: status of event %s: %w", id, err)
		}
		out[id] = done
	}
	return out, nil
}
