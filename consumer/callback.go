package consumer

// The path of a message, stage 1 of 9: the client's callback. A callback enters (or finds the consumer
// stopping), is handled (passes.go, then the stages after it, in the order handle calls them), and is
// answered here. Next: passes.go.

import (
	"context"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel/trace"
)

// answer is what the client is told about a callback: the resolution, and for each message whether its own
// failure spent an attempt (read on SuspendCurrentQueueAMoment only: keepAttempts).
type answer struct {
	res   resolution
	spent []bool
}

// consume is the client's callback: each message of the batch runs through the handler with its own
// context (waiting at the store health gate while the store is down); dead letters are published only
// when the batch as a whole will be acknowledged (a retried batch would publish them again on every
// redelivery); the combined outcome is resolved into the client's result, and each message's final
// decision is reported to the Observer (report).
//
// Some callbacks are not answered until the client has shut down, which then discards their result (its
// process queues are dropped), so the messages are neither acknowledged nor sent back with ReconsumeTimes
// raised, and their offsets are not committed; they are redelivered after a restart as they were: a
// callback that arrives after Shutdown began (a message the client had already fetched), one whose
// handler Shutdown cancelled, and one waiting for the store when Shutdown began. None of them is a
// failure of the message: handle returns errStopped, and the answer is unanswered's (resolve.go). In
// orderly mode they are answered SuspendCurrentQueueAMoment, never ConsumeRetryLater.
//
// With Config.BatchSize > 1 and more than one message in the callback, each member's handler context
// carries the callback's batch.Batch (batch.FromContext),
// whose shared resources (middleware.Dedup's one transaction per callback) are finished once after the
// last member; a member that depended on one that failed is decided a retry with its error.
//
// In orderly mode a failure answer also sets the queue's suspension to Config.SuspendTime on the orderly
// context, and the messages' attempt counts are kept (keepAttempts); the members of a batch behind one
// that is not acknowledged are not handled (holdsBack, pass.go); the client facts behind it: orderly.go.
func (c *Consumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
	a, err := c.handle(msgs)
	if err != nil { // errStopped: answered only once the client is down, which discards the answer
		<-c.clientDown
		a = c.unanswered(len(msgs))
	}
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok && a.res.Result == rmq.ConsumeRetryLater {
		cc.DelayLevelWhenNextConsume = a.res.DelayLevel
	}
	if a.res.Result == rmq.SuspendCurrentQueueAMoment {
		c.keepAttempts(msgs, a.spent)
		c.suspendFor(ctx)
	}
	// The error is only logged by the client; the result is what counts.
	return a.res.Result, err
}

// handle takes a callback from entering to its answer, stage by stage; errStopped when the consumer is
// stopping and the callback must not be answered. It leaves the in-flight group before returning, so
// that Shutdown never waits for a callback that waits for it.
func (c *Consumer) handle(msgs []*primitive.MessageExt) (answer, error) {
	spans := c.startSpans(msgs) // trace.go; nil without a tracer
	a, err := c.handleEntered(msgs, spans)
	if err != nil {
		endUnanswered(spans)
	}
	return a, err
}

// handleEntered is handle once the spans (nil: none) started: they end in report, or, on errStopped, in handle.
func (c *Consumer) handleEntered(msgs []*primitive.MessageExt, spans []trace.Span) (answer, error) {
	if !c.enter() {
		return answer{}, errStopped
	}
	defer c.inflight.Done()
	w := &outageWait{limit: c.cfg.OutageWait}
	ms, err := c.handleCallback(msgs, spans, w) // passes.go, pass.go, decide.go, batch.go
	if err != nil {
		return answer{}, err
	}
	if c.cfg.Orderly {
		exhaustAll(ms) // orderly.go
	}
	if err := c.publishDeadLetters(ms, w); err != nil { // publish.go
		return answer{}, err
	}
	a := c.resolve(ms)         // resolve.go
	c.report(ms, spans, a.res) // decision.go
	return a, nil
}

// enter registers an in-flight callback; false once shutting down.
func (c *Consumer) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.inflight.Add(1)
	return true
}

// suspendFor sets SuspendTime on the orderly callback context ctx, the time the client pauses the queue
// after a SuspendCurrentQueueAMoment answer.
func (c *Consumer) suspendFor(ctx context.Context) {
	if oc, ok := primitive.GetOrderlyCtx(ctx); ok {
		oc.SuspendCurrentQueueTimeMillis = int(c.cfg.SuspendTime / time.Millisecond)
	}
}

// keepAttempts sets, before a SuspendCurrentQueueAMoment answer, the ReconsumeTimes of each message so
// that after the client's increment it has grown by one only when spent[i] (the message's own failure),
// and never beyond MaxAttempts: the message's next delivery is then at most its last one, on which the
// consumer dead-letters it itself, and the client's check (ReconsumeTimes > MaxReconsumeTimes: a send to
// the DLQ without a reason) never fires. The client's loop holds the queue's consume lock while the
// callback runs and reads the count only after it returns, so the write is not concurrent with another.
func (c *Consumer) keepAttempts(msgs []*primitive.MessageExt, spent []bool) {
	maxAttempts := int32(c.cfg.MaxAttempts)
	for i, msg := range msgs {
		next := msg.ReconsumeTimes
		if spent[i] {
			next++
		}
		msg.ReconsumeTimes = min(next, maxAttempts) - 1 // the client adds one
	}
}
