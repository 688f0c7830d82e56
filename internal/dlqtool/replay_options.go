package dlqtool

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Limiter paces the sends; *rate.Limiter (golang.org/x/time/rate) is one.
type Limiter interface {
	// Wait blocks until the next send may go, or returns ctx's error.
	Wait(ctx context.Context) error
}

// ProcessedChecker tells whether a dedup scope has processed an event (mysqlProcessed reads the
// processed_event table of the dedup package).
type ProcessedChecker interface {
	Processed(ctx context.Context, scope, eventID string) (bool, error)
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Group is the consumer group whose letters are replayed, and the only group that receives them
	// (through %RETRY%<Group>). Required.
	Group string
	// Namespace is the RocketMQ namespace of the group and topics ("" = none); Group, TargetTopic and the
	// result topics are names without it.
	Namespace string
	// Scope is the dedup scope checked for "already processed" (dedup.WithScope); default Group.
	Scope string
	// TargetTopic, when set, is the topic every replay is presented on instead of the letter's origin
	// topic (still only to Group, which must subscribe it). Must not be a %RETRY% or %DLQ% topic.
	TargetTopic string
	// Force sends letters the audit says were sent or may have been sent ("sending"). It does not send a
	// letter whose event the scope already processed: the consumer would treat it as a duplicate.
	Force bool
	// DryRun decides every letter (the audit and processed checks are read) but claims, sends and
	// records nothing: letters that would go are ReplayWouldSend.
	DryRun bool
	// Operator names who runs the replay (audit replayed_by, RMQGUARD_REPLAYED_BY). Required.
	Operator string
	// ReplayID identifies the run; default a new random UUID.
	ReplayID string
	// Sender sends the replays. Required unless DryRun.
	Sender rmq.Sender
	// Audit records what was sent. Required.
	Audit Audit
	// Processed answers the "already processed" check. Required.
	Processed ProcessedChecker
	// Limiter, when set, is waited on before each send (not in a dry run).
	Limiter Limiter
	// Progress, when set, is called after each letter with the number done, the total and its result.
	Progress func(done, total int, r LetterResult)
	// Now is the clock of RMQGUARD_REPLAYED_AT; default time.Now.
	Now func() time.Time
}

// validate names the first invalid field.
func (o ReplayOptions) validate() error {
	bad := func(field, why string) error { return fmt.Errorf("dlq: replay: invalid %s: %s", field, why) }
	switch {
	case strings.TrimSpace(o.Group) == "":
		return bad("Group", "required")
	case strings.HasPrefix(o.Group, rmq.RetryTopicPrefix) || strings.HasPrefix(o.Group, rmq.DLQTopicPrefix):
		return bad("Group", fmt.Sprintf("%q is a topic name, not a consumer group", o.Group))
	case rmq.ValidateNamespace(o.Namespace) != nil:
		return bad("Namespace", rmq.ValidateNamespace(o.Namespace).Error())
	case o.TargetTopic != "" && !routableTopic(o.TargetTopic):
		return bad("TargetTopic", fmt.Sprintf("%q: a handler must never see a %s or %s topic", o.TargetTopic, rmq.RetryTopicPrefix, rmq.DLQTopicPrefix))
	case strings.TrimSpace(o.Operator) == "":
		return bad("Operator", "required (who runs the replay is recorded)")
	case o.Audit == nil:
		return bad("Audit", "required")
	case o.Processed == nil:
		return bad("Processed", "required")
	case o.Sender == nil && !o.DryRun:
		return bad("Sender", "required unless DryRun")
	}
	return nil
}

// withDefaults fills Scope, ReplayID and Now.
func (o ReplayOptions) withDefaults() ReplayOptions {
	if o.Scope == "" {
		o.Scope = o.Group
	}
	if o.ReplayID == "" {
		o.ReplayID = newReplayID()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
