package consumer

// The path of a message, stage 4 of 9: one message through the store health gate (gate.go) and the
// handler, under HandlerTimeout. Next: batch.go.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/batch"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// outageWait is one callback's bound on waiting for the store: Config.OutageWait from the first wait.
type outageWait struct {
	limit time.Duration
	end   time.Time
}

// deadline returns the end of the wait, starting the clock on the first call.
func (w *outageWait) deadline() time.Time {
	if w.end.IsZero() {
		w.end = time.Now().Add(w.limit)
	}
	return w.end
}

// subscribed reports whether d's tag is in the group's subscription for its original topic. A message
// whose original topic is unknown (a retried message without RETRY_TOPIC) is handled.
func (c *Consumer) subscribed(d *Delivery) bool {
	f, ok := c.filters[d.Topic]
	if !ok {
		return d.Topic == irmq.RetryTopic(d.Group)
	}
	return f.matches(d.Msg.GetTags())
}

// unsubscribed returns the outcome of a message whose tag or topic the group no longer subscribes (it
// came back through %RETRY%<group>, which the client subscribes with "*"); its decision (Observer.Decided)
// and its line, at debug, name the tag in the reason.
func (c *Consumer) unsubscribed(d *Delivery) Outcome {
	return Outcome{Kind: KindUnsubscribed, Reason: "tag " + d.Msg.GetTags() + " not subscribed"}
}

// decide runs the handler for m until it decides something other than KindUnavailable, waiting at the
// store health gate before each run while it is closed, for at most w's bound (then the unavailable
// outcome stands: a retry that spends an attempt), and sets m's outcome and error. It returns errStopped
// when the consumer is stopping and the message must not be answered: the gate stopped while it waited,
// or Shutdown cancelled its handler.
func (c *Consumer) decide(m *message, span trace.Span, w *outageWait, b *batch.Batch[Outcome, string]) error {
	for {
		gen, closed := c.gate.current()
		if closed != nil {
			switch c.gate.wait(closed, w.deadline()) {
			case gateStopped:
				return errStopped
			case gateTimedOut:
				m.outcome, m.err = Unavailable("store still unavailable"), nil
				c.outageTooLong(m)
				return nil
			}
			continue
		}
		m.outcome, m.err = c.handleOne(m.d, span, b)
		if c.runCtx.Err() != nil && (m.err != nil || !m.outcome.Kind.Acknowledges()) {
			return errStopped // cancelled by Shutdown: not the message's failure
		}
		if m.outcome.Kind != KindUnavailable {
			if b == nil || b.Careful() { // a first pass's member may not have reached the store: see handleCallback
				c.gate.succeeded()
			}
			return nil
		}
		ch, stopped := c.gate.trip(gen, m.outcome.Reason)
		if stopped {
			return errStopped
		}
		if ch == nil {
			continue // the gate reopened while this handler ran: its failure predates the recovery
		}
		switch c.gate.wait(ch, w.deadline()) {
		case gateStopped:
			return errStopped
		case gateTimedOut:
			c.outageTooLong(m)
			return nil
		}
	}
}

// outageTooLong logs at debug that m waited OutageWait for the store and is answered as a retry (in orderly mode:
// its queue is suspended, without spending an attempt).
func (c *Consumer) outageTooLong(m *message) {
	msg := "store still unavailable after OutageWait; the message is retried and spends an attempt"
	if c.cfg.Orderly {
		msg = "store still unavailable after OutageWait; the queue is suspended and the message handled again, without spending an attempt"
	}
	d := m.d
	c.log.Debug(msg, // the message's decision line (unavailable, at warn) follows
		zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
		zap.Int("attempt", d.Attempt), zap.Duration("outage_wait", c.cfg.OutageWait), zap.Error(m.err))
}

// handleOne runs the handler for one delivery under HandlerTimeout, with b (the callback's Batch, nil
// when BatchSize is 1) and its span (nil: none) in its context.
func (c *Consumer) handleOne(d *Delivery, span trace.Span, b *batch.Batch[Outcome, string]) (Outcome, error) {
	parent := c.runCtx
	if span != nil {
		parent = trace.ContextWithSpan(parent, span)
	}
	ctx, cancel := context.WithTimeout(batch.With(parent, b), c.cfg.HandlerTimeout)
	defer cancel()
	c.observer.InFlight(d.Group, 1)
	defer c.observer.InFlight(d.Group, -1)
	return c.handler.Handle(ctx, d) // a zero Outcome without error is logged at error with the decision
}
