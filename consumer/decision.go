package consumer

// The path of a message, stage 9 of 9: each message's final decision is reported to the Observer and
// logged (decisionlog.go); the answer then goes back to the client (callback.go).

import (
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
)

// Decision is the consumer's final word on one message, reported once through Observer.Decided: what the
// broker was told, after the callback's outcomes were combined (a batch is acknowledged or retried as a
// whole) and its dead letters published. "The outcome is decided once, and everyone reports that
// decision": metrics and the consumer's log line follow it, not the chain's intermediate opinion.
//
// Outcome.Kind, the final outcome, is:
//   - the message's own outcome when it acknowledges the message (processed, duplicate, stale,
//     dead_lettered: published to %DLQ%<group> with its reason and accepted, unsubscribed), even when
//     its batch was retried (BatchRetried: it comes back, as a duplicate);
//   - dead_letter when the broker moves the message to %DLQ%<group> itself: a single dead letter answered
//     with DelayLevelDLQ (no DeadLetterSink, or its publish failed), or a message not acknowledged on its
//     last delivery (Attempt == MaxAttempts: the broker dead-letters a retry then); never in orderly
//     mode, where the consumer publishes every letter itself (dead_lettered) and a message not
//     acknowledged is suspended and handled again (retry, unavailable or unset);
//   - unavailable when it waited OutageWait for the store and was answered ConsumeRetryLater (an attempt
//     spent because of the outage);
//   - unset when the chain decided nothing and returned no error (retried);
//   - retry otherwise: a retry, an error, a dead letter whose batch was retried (because of a
//     neighbour, or because its own publish failed within OutageWait; it is published when the batch is
//     acknowledged), or in orderly mode a batch member not handled because one before it was not
//     acknowledged (Chain is then that retry too: the chain did not run).
//
// Outcome.Cause is always set for duplicates (redelivery, resend, replay: the chain's, read from the dedup
// row; else CauseUnknown, never a guess) and dead letters (a reason class; the chain's, else CausePermanent
// for a dead letter the chain decided and CauseExhausted for one the broker makes on the last delivery).
type Decision struct {
	// Outcome is the final outcome (see above); its Reason is the chain's or the consumer's.
	Outcome Outcome
	// Chain is the outcome the handler chain returned (its last run), before the consumer combined the
	// batch and published dead letters; KindUnsubscribed when the chain did not run.
	Chain Outcome
	// Err is the chain's error, if any.
	Err error
	// BatchRetried is true when the message's own outcome acknowledged it but its batch was answered
	// ConsumeRetryLater: the broker delivers it again (and, on its last delivery, dead-letters it).
	BatchRetried bool
	// Elapsed is the time from the start of the message's handling to its decision: the handler runs and
	// any wait at the store health gate, without dead-letter publishing.
	Elapsed time.Duration
}

// decideFinal computes the Decision of d from the chain's outcome, the outcome after dead-letter
// publishing (o, err), the callback's resolution and the consumption mode. In orderly mode the broker
// never dead-letters a message itself (the consumer publishes every letter, and keeps the attempt count
// from reaching the client's send-back), so a message not acknowledged there is retried: its queue is
// suspended and it is handled again.
func decideFinal(d *Delivery, chain, o Outcome, err error, res Resolution, mode Mode) Decision {
	dec := Decision{Chain: chain, Err: err}
	switch {
	case err == nil && o.Kind.Acknowledges():
		dec.Outcome, dec.BatchRetried = o, res.Result != rmq.ConsumeSuccess
	case mode == Concurrent && (res.DelayLevel == DelayLevelDLQ || d.LastAttempt()):
		dec.Outcome = Outcome{Kind: KindDeadLetter, Reason: o.Reason, Cause: o.Cause}
		if dec.Outcome.Cause == "" && o.Kind != KindDeadLetter {
			dec.Outcome.Cause = CauseExhausted
		}
	case o.Kind == KindUnavailable || (o.Kind == KindUnset && err == nil):
		dec.Outcome = o
	default:
		dec.Outcome = Outcome{Kind: KindRetry, DelayLevel: o.DelayLevel, Reason: o.Reason, Cause: o.Cause}
	}
	switch dec.Outcome.Kind {
	case KindDuplicate:
		if !knownDuplicateCause(dec.Outcome.Cause) {
			dec.Outcome.Cause = CauseUnknown
		}
	case KindDeadLetter, KindDeadLettered:
		if dec.Outcome.Cause == "" {
			dec.Outcome.Cause = CausePermanent
		}
		dec.Outcome.Cause = letterClass(dec.Outcome.Cause)
	}
	return dec
}

// report tells the observer the final decision about each message of an answered callback and logs
// it: one line per message, however many times its callback was handled (decisionlog.go).
func (c *Consumer) report(ms []message, res Resolution) {
	for _, m := range ms {
		dec := decideFinal(m.d, m.chain, m.outcome, m.err, res, c.mode())
		dec.Elapsed = m.elapsed
		c.observer.Decided(m.d, dec)
		c.logDecision(m.d, dec)
	}
}
