package consumer

// Kind names what happened to one message. Its zero value ("unset": no middleware decided) is deliberately
// not a success: the client's ConsumeSuccess is the zero value of its result type, so an unset outcome must
// never be mistaken for "done". It resolves like KindRetry.
type Kind uint8

const (
	// kindUnset is the zero value: no middleware decided. It resolves like KindRetry.
	kindUnset Kind = iota
	// KindProcessed: the handler's effect committed.
	KindProcessed
	// KindDuplicate: the event ID was already processed by this consumer group; nothing was written.
	KindDuplicate
	// KindStale: the event carries an older aggregate version than the stored state; nothing was written
	// (a stale event must never overwrite newer state: events of one aggregate can arrive out of order).
	KindStale
	// KindRetry: the message should be delivered again later (ConsumeRetryLater).
	KindRetry
	// KindDeadLetter: the message can never succeed and goes to %DLQ%<group> now.
	KindDeadLetter
	// KindDeadLettered: the framework itself published the message to %DLQ%<group> and the broker
	// accepted it, so the original may be acknowledged. Only the consumer sets it, after a DeadLetterSink
	// returned nil.
	KindDeadLettered
	// KindUnavailable: the message was not handled because the infrastructure it needs (the store) is down
	// or unwritable; it is not the message's fault. The consumer never acknowledges or dead-letters it and
	// does not spend an attempt on it: it pauses consumption (the store health gate), waits, and runs the
	// handler again. Only when the wait passes Config.OutageWait is the message answered ConsumeRetryLater.
	// middleware.Classify returns it for retry.ClassInfrastructure errors, on every delivery.
	KindUnavailable
	// KindUnsubscribed: the message's tag is not in the consumer group's subscription expression for its
	// topic, or its topic is no longer subscribed; it arrived through %RETRY%<group>, which the client
	// subscribes with "*". Acknowledged without running the handler. Only the consumer sets it.
	KindUnsubscribed
)

// String returns the lower-case label used in logs and in the outcome label of metrics:
// "unset", "processed", "duplicate", "stale", "retry", "dead_letter", "dead_lettered", "unavailable" or
// "unsubscribed".
func (k Kind) String() string {
	switch k {
	case KindProcessed:
		return "processed"
	case KindDuplicate:
		return "duplicate"
	case KindStale:
		return "stale"
	case KindRetry:
		return "retry"
	case KindDeadLetter:
		return "dead_letter"
	case KindDeadLettered:
		return "dead_lettered"
	case KindUnavailable:
		return "unavailable"
	case KindUnsubscribed:
		return "unsubscribed"
	default:
		return "unset"
	}
}

// Acknowledges reports whether the kind lets the client acknowledge the message (ConsumeSuccess):
// processed, duplicate, stale, dead-lettered by the framework, and unsubscribed.
func (k Kind) Acknowledges() bool {
	return k == KindProcessed || k == KindDuplicate || k == KindStale || k == KindDeadLettered || k == KindUnsubscribed
}

// Outcome is a handler's decision about one message. Build it with Processed, Duplicate, Stale, Retry,
// DeadLetter or Unavailable; the zero Outcome means "undecided" and is retried, never acknowledged.
type Outcome struct {
	// Kind is what happened.
	Kind Kind
	// Committed reports that the message's dedup row is committed: by this delivery's transaction
	// (processed, or a stale decision recorded) or by an earlier one (a duplicate). middleware.Dedup sets
	// it, never a handler; in a batch it marks a member kept in the batch's transaction, which the consumer
	// commits after the last member (a failed COMMIT makes the member a retry). Such an outcome, when it
	// acknowledges the message, is final: no deadline or cancellation turns it into a retry.
	Committed bool
	// DelayLevel applies to KindRetry only: the broker delay level (1..18) for the next delivery;
	// 0 lets the broker pick it from ReconsumeTimes (the client's default schedule).
	DelayLevel int
	// Reason says why a message is retried or dead-lettered, for logs and DLQ metadata. Empty for successes.
	Reason string
	// Cause classifies the outcome for metrics, from a small fixed set of labels: a duplicate's cause, a
	// dead letter's reason class (the package doc, "Cause"). Empty when not known; the consumer then fills
	// it in its final decision.
	Cause string
}

// Processed is the outcome of a handler whose effect committed.
func Processed() Outcome { return Outcome{Kind: KindProcessed} }

// Duplicate is the outcome of an event ID this consumer group already processed.
func Duplicate() Outcome { return Outcome{Kind: KindDuplicate} }

// Stale is the outcome of an event older than the stored aggregate version.
func Stale(reason string) Outcome { return Outcome{Kind: KindStale, Reason: reason} }

// Retry asks for a later redelivery. delayLevel 0 lets the broker choose from ReconsumeTimes; 1..18 picks
// a broker delay level (1s 5s 10s 30s 1m … 2h on a default broker).
func Retry(delayLevel int, reason string) Outcome {
	return Outcome{Kind: KindRetry, DelayLevel: delayLevel, Reason: reason}
}

// DeadLetter sends the message to %DLQ%<group> at once, with reason as its explanation.
func DeadLetter(reason string) Outcome { return Outcome{Kind: KindDeadLetter, Reason: reason} }

// Unavailable is the outcome of a message that could not be handled because the store is down or
// unwritable (reason says how): consumption pauses and the message is handled again when the store is
// back, without spending an attempt.
func Unavailable(reason string) Outcome { return Outcome{Kind: KindUnavailable, Reason: reason} }
