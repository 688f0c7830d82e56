package consumer

// The path of a message, stage 3 of 9: one pass over the callback's messages, in their order, each
// decided on its own (decide.go), then the pass's Batch finished (batch.go). Next: decide.go.

import (
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqguard/rmqguard/internal/batch"
)

// message is one message of a callback on its way to the answer: its delivery, what the chain returned,
// its outcome so far (a batch's shared resource, orderly exhaustion and dead-letter publishing change
// it), the chain's error, its handling time, and whether it waited (orderly: not handled, held back
// behind a member that was not acknowledged).
type message struct {
	d       *Delivery
	chain   Outcome // what the chain returned, before a batch's shared resource was finished
	outcome Outcome
	err     error
	elapsed time.Duration
	waited  bool
}

// pass is one handling of a callback's messages, and how its Batch finished: lost is the first Finish
// error, outage the first that wraps batch.ErrStoreUnavailable, if any.
type pass struct {
	ms           []message
	lost, outage error
}

// handlePass handles each message of the callback once, with b (nil: no batch) and its span (spans[i];
// nil: none) in their handlers' contexts, and finishes b's shared resources. The error is errStopped when
// the callback must not be answered.
func (c *Consumer) handlePass(msgs []*primitive.MessageExt, spans []trace.Span, w *outageWait, b *batch.Batch[Outcome, string]) (pass, error) {
	p := pass{ms: make([]message, len(msgs))}
	held := false
	for i, msg := range msgs {
		start := time.Now()
		m := &p.ms[i]
		m.d = newNamespacedDelivery(c.cfg, msg)
		m.d.MaxAttempts = c.cfg.MaxAttempts
		if held {
			m.outcome, m.waited = heldBack(), true
			continue
		}
		if !c.subscribed(m.d) {
			m.outcome = c.unsubscribed(m.d)
			continue
		}
		if b != nil {
			b.Enter(i)
		}
		var span trace.Span
		if spans != nil {
			span = spans[i]
		}
		if err := c.decide(m, span, w, b); err != nil {
			return pass{}, err
		}
		m.elapsed = time.Since(start)
		held = c.cfg.Orderly && holdsBack(exhaust(m.d, m.outcome, m.err), m.err)
	}
	for i := range p.ms {
		p.ms[i].chain = p.ms[i].outcome
	}
	if b != nil {
		// The shared transaction commits before exhaust, dead letters and reports: a member that depended
		// on a failed COMMIT is decided a retry (its chain outcome stays the handler's, logged beside it).
		p.lost, p.outage = finishBatch(b, p.ms)
	}
	return p, nil
}

// holdsBack reports whether the outcome of an orderly batch member (after exhaust) holds back the members
// behind it: it is neither acknowledged nor a dead letter, so the batch is suspended and the member
// handled again; a member behind it handled now would take effect before it, out of order. A dead letter
// does not: its fate is decided, and its letter is published when the batch is acknowledged.
func holdsBack(o Outcome, err error) bool {
	return o.Kind != KindDeadLetter && (err != nil || !o.Kind.Acknowledges())
}

// heldBack is the outcome of an orderly batch member that was not handled because a member before it was
// not acknowledged (holdsBack): a retry, reported as such, that spends no attempt.
func heldBack() Outcome {
	return Retry(0, "not handled: a message before it in its orderly batch was not acknowledged")
}
