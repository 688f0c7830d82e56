package consumer

// The path of a message, stage 9 of 9: each message's final decision is reported to the Observer,
// logged (decisionlog.go) and ends its span (trace.go); the answer then goes back to the client (callback.go).

import (
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// Decision is the consumer's final word on one message, reported once through Observer.Decided: what the
// broker was told after the callback's outcomes were combined and its dead letters published. Metrics and
// the log line follow it. See the package doc, "Decision".
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
// publishing (o, err), the callback's resolution and whether consumption is orderly. In orderly mode the broker
// never dead-letters a message itself (the consumer publishes every letter, and keeps the attempt count
// from reaching the client's send-back), so a message not acknowledged there is retried: its queue is
// suspended and it is handled again.
func decideFinal(d *Delivery, chain, o Outcome, err error, res resolution, orderly bool) Decision {
	dec := Decision{Chain: chain, Err: err}
	switch {
	case err == nil && o.Kind.Acknowledges():
		dec.Outcome, dec.BatchRetried = o, res.Result != rmq.ConsumeSuccess
	case !orderly && (res.DelayLevel == delayLevelDLQ || d.LastAttempt()):
		dec.Outcome = Outcome{Kind: KindDeadLetter, Reason: o.Reason, Cause: o.Cause}
		if dec.Outcome.Cause == "" && o.Kind != KindDeadLetter {
			dec.Outcome.Cause = causelabel.Exhausted
		}
	case o.Kind == KindUnavailable || (o.Kind == kindUnset && err == nil):
		dec.Outcome = o
	default:
		dec.Outcome = Outcome{Kind: KindRetry, DelayLevel: o.DelayLevel, Reason: o.Reason, Cause: o.Cause}
	}
	switch dec.Outcome.Kind {
	case KindDuplicate:
		if !knownDuplicateCause(dec.Outcome.Cause) {
			dec.Outcome.Cause = causelabel.Unknown
		}
	case KindDeadLetter, KindDeadLettered:
		if dec.Outcome.Cause == "" {
			dec.Outcome.Cause = causelabel.Permanent
		}
		dec.Outcome.Cause = letterClass(dec.Outcome.Cause)
	}
	return dec
}

// report tells the observer the final decision about each message of an answered callback, logs it
// (one line per message, however many times its callback was handled: decisionlog.go) and ends its
// span, spans[i] (spans nil: none; trace.go).
func (c *Consumer) report(ms []message, spans []trace.Span, res resolution) {
	for i, m := range ms {
		dec := decideFinal(m.d, m.chain, m.outcome, m.err, res, c.cfg.Orderly)
		dec.Elapsed = m.elapsed
		c.observer.Decided(m.d, dec)
		c.logDecision(m.d, dec)
		if spans != nil {
			endSpan(spans[i], m.d, dec)
		}
	}
}
