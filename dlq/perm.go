package dlq

import (
	"context"
	"errors"
)

// ErrWriteOnly means %DLQ%<group> exists but none of its queues is readable: brokers before 4.9.2 create
// it write-only (perm 2). FixPerm makes it readable.
var ErrWriteOnly = errors.New("dlq: the DLQ topic is write-only (perm 2)")

// PermFix reports what FixPerm did.
type PermFix struct {
	// Topic is the DLQ topic.
	Topic string
	// Before and After are the topic's perm before and after (After == Before when nothing changed).
	Before, After int
	// ReadQueues and WriteQueues are the queue counts, kept as they were.
	ReadQueues, WriteQueues int
}

// FixPerm makes group's DLQ topic readable (perm 6), keeping its queue counts.
//
// SKELETON: replaced by the dlq-read work of issue 6.
func FixPerm(ctx context.Context, cluster Cluster, group string) (PermFix, error) {
	return PermFix{}, errors.New("dlq: FixPerm: not built yet")
}
