package consumer

// The path of a message, stage 2 of 9: the callback's passes. A callback is handled alone (one pass,
// no Batch) or as a Batch, in as many passes as its shared resource needs. Next: pass.go.

import (
	"errors"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/batch"
)

// handleCallback handles the callback's messages: alone (BatchSize 1, or one message), or as one Batch per
// pass. The first pass is optimistic (batch.Batch.Careful false); a resource that asks for a careful pass
// (batch.ErrHandleCarefully: a member it deferred was not kept) makes the consumer handle the callback again at
// once, carefully. When the batch's shared resource was lost to the store (batch.ErrStoreUnavailable), it waits
// at the store gate (unless it reopened since the pass began) and handles the whole callback again with a
// new Batch, within w's bound. A resource lost for another reason (a deadlock with another batch:
// concurrent deliveries of one event in two batches, or handlers that lock the same rows in different
// orders, a member outliving the batch's deadline) is not the members' own failure either: the callback is
// handled once more, at once, carefully; when that pass loses its resource too, each member is handled
// alone (no Batch), so only a member whose own handler fails spends an attempt. Middlewares see every
// pass; the consumer reports each message's decision once, from the last, whose messages it returns.
// spans (nil: none) are the messages' spans, the parents of every pass's handler contexts.
// The error is errStopped when the callback must not be answered.
func (c *Consumer) handleCallback(msgs []*primitive.MessageExt, spans []trace.Span, w *outageWait) ([]message, error) {
	if c.cfg.BatchSize <= 1 || len(msgs) <= 1 { // a callback of one message handles it alone, as BatchSize 1
		p, err := c.handlePass(msgs, spans, w, nil)
		return p.ms, err
	}
	handledAgain, careful := false, false
	for {
		gen, _ := c.gate.current()
		b, cancel := batch.New[Outcome, string](c.runCtx, c.cfg.HandlerTimeout, len(msgs), careful, c.cfg.Orderly)
		p, err := c.handlePass(msgs, spans, w, b)
		cancel() // an unanswered callback: its shared transaction is rolled back, never committed
		if err == nil && p.lost == nil && !careful {
			c.gate.succeeded() // the first pass's resources reached the store (its members' work was deferred there)
		}
		if err != nil || p.lost == nil {
			return p.ms, err
		}
		if p.outage == nil {
			if !careful && errors.Is(p.lost, batch.ErrHandleCarefully) {
				c.logFirstPassPanic(b, p)
				careful = true // a member's own failure, decided in the careful pass: no other log line here
				continue
			}
			if handledAgain {
				// Lost twice (the same deadlock again, or a member outliving the batch's deadline): each member
				// alone, so that only a member whose own handler fails spends an attempt.
				c.log.Info("the batch's shared transaction was lost again; handling each member alone",
					zap.String("group", c.cfg.Group), zap.Int("members", len(msgs)), zap.Error(p.lost))
				p, err = c.handlePass(msgs, spans, w, nil)
				return p.ms, err
			}
			handledAgain, careful = true, true
			c.log.Info("the batch's shared transaction was lost; handling the batch once more in a new one", // expected (a deadlock between batches), healed here
				zap.String("group", c.cfg.Group), zap.Int("members", len(msgs)), zap.Error(p.lost))
			continue
		}
		ch, stopped := c.gate.trip(gen, p.outage.Error())
		if stopped {
			return nil, errStopped
		}
		if ch == nil {
			continue // the gate reopened during the pass (a member waited at it): handle the callback again
		}
		switch c.gate.wait(ch, w.deadline()) {
		case gateStopped:
			return nil, errStopped
		case gateTimedOut:
			c.log.Warn("store still unavailable after OutageWait; the batch is retried and each member spends an attempt",
				zap.String("group", c.cfg.Group), zap.Int("members", len(msgs)), zap.Error(p.outage))
			return p.ms, nil
		}
	}
}

// logFirstPassPanic logs at warn a member's panic that ended b, a first pass p (p.lost: its Finish error):
// the careful pass decides the member, and may not meet the panic again (no line from middleware.Recover then).
func (c *Consumer) logFirstPassPanic(b *batch.Batch[Outcome, string], p pass) {
	i, ok := panicked(b)
	if !ok || i >= len(p.ms) {
		return
	}
	d := p.ms[i].d
	c.log.Warn("handler panicked in the batch's first pass; the batch is handled again carefully, where the member is decided on its own",
		zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
		zap.String("event_id", d.EventID), zap.Int("attempt", d.Attempt), zap.Error(p.lost))
}
