package consumer

import (
	"context"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/zap"

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
// failure of the message. In orderly mode they are answered SuspendCurrentQueueAMoment, never
// ConsumeRetryLater (see unanswered).
//
// With Config.BatchSize > 1 and more than one message in the callback, each member's handler context
// carries the callback's Batch (BatchFromContext),
// whose shared resources (middleware.Dedup's one transaction per callback) are finished once after the
// last member; a member that depended on one that failed is decided a retry with its error.
//
// In orderly mode a failure answer also sets the queue's suspension to Config.SuspendTime on the orderly
// context, and the messages' attempt counts are kept (keepAttempts); the members of a batch behind one
// that is not acknowledged are not handled (holdsBack); see orderly.go.
func (c *Consumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
	if !c.enter() {
		<-c.clientDown
		return c.unanswered(ctx, msgs)
	}
	res, answer := c.consumeEntered(msgs)
	if !answer {
		<-c.clientDown
		return c.unanswered(ctx, msgs)
	}
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok && res.Result == rmq.ConsumeRetryLater {
		cc.DelayLevelWhenNextConsume = res.DelayLevel
	}
	if res.Result == rmq.SuspendCurrentQueueAMoment {
		c.suspendFor(ctx)
	}
	// The error is only logged by the client; the result is what counts.
	return res.Result, nil
}

// consumeEntered decides a registered callback; answer is false when it must not be answered. It leaves
// the in-flight group before returning, so that Shutdown never waits for a callback that waits for it.
func (c *Consumer) consumeEntered(msgs []*primitive.MessageExt) (res Resolution, answer bool) {
	defer c.inflight.Done()
	w := &outageWait{limit: c.cfg.OutageWait}
	p, ok := c.handleCallback(msgs, w)
	if !ok {
		return Resolution{}, false
	}
	ds, outcomes, errs := p.ds, p.outcomes, p.errs
	if c.cfg.Orderly {
		for i, d := range ds {
			if !p.waiting[i] {
				outcomes[i] = exhaust(d, outcomes[i], errs[i])
			}
		}
	}
	if !c.publishDeadLetters(ds, outcomes, errs, w) {
		return Resolution{}, false
	}
	o, err := combine(outcomes, errs)
	res = Resolve(o, err, c.mode())
	c.report(ds, p.chain, outcomes, errs, p.elapsed, res)
	if res.Result == rmq.SuspendCurrentQueueAMoment {
		c.keepAttempts(msgs, spentAttempts(p.chain, errs, p.waiting))
	}
	return res, true
}

// pass is one handling of a callback's messages: their deliveries, final and chain outcomes, errors,
// handling times, and (orderly) which were held back behind a member that was not acknowledged.
type pass struct {
	ds       []*Delivery
	outcomes []Outcome
	chain    []Outcome // what the chain returned, before a batch's shared resource was finished
	errs     []error
	elapsed  []time.Duration
	waiting  []bool
}

// handlePass handles each message of the callback once, with b (nil: no batch) in their handlers'
// contexts, and finishes b's shared resources; lost is the first Finish error, outage the first that wraps
// ErrStoreUnavailable, if any. ok is false when the callback must not be answered.
func (c *Consumer) handlePass(msgs []*primitive.MessageExt, w *outageWait, b *Batch) (p pass, lost, outage error, ok bool) {
	n := len(msgs)
	p = pass{ds: make([]*Delivery, n), outcomes: make([]Outcome, n), errs: make([]error, n),
		elapsed: make([]time.Duration, n), waiting: make([]bool, n)}
	held := false
	for i, msg := range msgs {
		start := time.Now()
		p.ds[i] = newNamespacedDelivery(c.cfg, msg)
		p.ds[i].MaxAttempts = c.cfg.MaxAttempts
		if held {
			p.outcomes[i], p.waiting[i] = heldBack(), true
			continue
		}
		if !c.subscribed(p.ds[i]) {
			p.outcomes[i] = c.unsubscribed(p.ds[i])
			continue
		}
		if b != nil {
			b.enter(i)
		}
		if p.outcomes[i], p.errs[i], ok = c.decide(p.ds[i], w, b); !ok {
			return pass{}, nil, nil, false
		}
		p.elapsed[i] = time.Since(start)
		held = c.cfg.Orderly && holdsBack(exhaust(p.ds[i], p.outcomes[i], p.errs[i]), p.errs[i])
	}
	p.chain = append([]Outcome(nil), p.outcomes...)
	if b != nil {
		// The shared transaction commits before exhaust, dead letters and reports: a member that depended
		// on a failed COMMIT is decided a retry (its chain outcome stays the handler's, logged beside it).
		lost, outage = b.finish(p.chain, p.outcomes, p.errs)
	}
	return p, lost, outage, true
}

// decide runs the handler for d until it decides something other than KindUnavailable, waiting at the
// store health gate before each run while it is closed, for at most w's bound (then the unavailable
// outcome stands: a retry that spends an attempt). ok is false when the consumer is stopping and the
// message must not be answered: the gate stopped while it waited, or Shutdown cancelled its handler.
func (c *Consumer) decide(d *Delivery, w *outageWait, b *Batch) (o Outcome, err error, ok bool) {
	for {
		gen, closed := c.gate.current()
		if closed != nil {
			switch c.gate.wait(closed, w.deadline()) {
			case gateStopped:
				return Outcome{}, nil, false
			case gateTimedOut:
				return c.outageTooLong(d, Unavailable("store still unavailable"), nil)
			}
			continue
		}
		o, err = c.handleOne(d, b)
		if c.runCtx.Err() != nil && (err != nil || !o.Kind.Acknowledges()) {
			return o, err, false // cancelled by Shutdown: not the message's failure
		}
		if o.Kind != KindUnavailable {
			if b == nil || b.Careful() { // a first pass's member may not have reached the store: see handleCallback
				c.gate.succeeded()
			}
			return o, err, true
		}
		ch, stopped := c.gate.trip(gen, o.Reason)
		if stopped {
			return o, err, false
		}
		if ch == nil {
			continue // the gate reopened while this handler ran: its failure predates the recovery
		}
		switch c.gate.wait(ch, w.deadline()) {
		case gateStopped:
			return o, err, false
		case gateTimedOut:
			return c.outageTooLong(d, o, err)
		}
	}
}

// outageTooLong logs at debug that d waited OutageWait for the store and is answered as a retry (in orderly mode:
// its queue is suspended, without spending an attempt).
func (c *Consumer) outageTooLong(d *Delivery, o Outcome, err error) (Outcome, error, bool) {
	msg := "store still unavailable after OutageWait; the message is retried and spends an attempt"
	if c.cfg.Orderly {
		msg = "store still unavailable after OutageWait; the queue is suspended and the message handled again, without spending an attempt"
	}
	c.log.Debug(msg, // the message's decision line (unavailable, at warn) follows
		zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
		zap.Int("attempt", d.Attempt), zap.Duration("outage_wait", c.cfg.OutageWait), zap.Error(err))
	return o, err, true
}

// handleOne runs the handler for one delivery under HandlerTimeout, with b (the callback's Batch, nil
// when BatchSize is 1) in its context.
func (c *Consumer) handleOne(d *Delivery, b *Batch) (Outcome, error) {
	ctx, cancel := context.WithTimeout(withBatch(c.runCtx, b), c.cfg.HandlerTimeout)
	defer cancel()
	c.observer.InFlight(d.Group, 1)
	defer c.observer.InFlight(d.Group, -1)
	return c.handler(ctx, d) // a zero Outcome without error is logged at error with the decision
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

// unsubscribed reports and returns the outcome of a message whose tag or topic the group no longer
// subscribes (it came back through %RETRY%<group>, which the client subscribes with "*"); its decision
// line, at debug, names the tag in its reason.
func (c *Consumer) unsubscribed(d *Delivery) Outcome {
	c.observer.Unsubscribed(d.Group, d.Topic)
	return Outcome{Kind: KindUnsubscribed, Reason: "tag " + d.Msg.GetTags() + " not subscribed"}
}

// publishDeadLetters publishes the dead letters of a callback whose other messages are all acknowledged:
// alone, through the DeadLetterSink or the own producer (after WithDeadLetterSink(nil) the broker
// dead-letters it with DelayLevelDLQ), and in orderly mode always by the consumer (publishOrderly: there
// is no DelayLevelDLQ there); in a batch, always by the consumer, because the broker would dead-letter
// the whole batch.
// It returns false when the consumer is stopping and the callback must not be answered.
func (c *Consumer) publishDeadLetters(ds []*Delivery, outcomes []Outcome, errs []error, w *outageWait) bool {
	if needsRetry(outcomes, errs) {
		return true
	}
	for i := range ds {
		if outcomes[i].Kind != KindDeadLetter {
			continue
		}
		if len(ds) == 1 {
			switch {
			case c.cfg.Orderly:
				outcomes[i], errs[i] = c.publishOrderly(ds[i], outcomes[i], errs[i])
			case c.publishAlone:
				outcomes[i], errs[i] = c.publishDeadLetter(ds[i], outcomes[i], errs[i])
			}
			continue
		}
		var ok bool
		if outcomes[i], errs[i], ok = c.publishInBatch(ds[i], outcomes[i], errs[i], w); !ok {
			return false
		}
		if outcomes[i].Kind != KindDeadLettered {
			return true // the batch is retried: the other letters would be published again
		}
	}
	return true
}

// needsRetry reports whether some message of a batch, other than a dead letter, is not acknowledged.
func needsRetry(outcomes []Outcome, errs []error) bool {
	for i, o := range outcomes {
		if o.Kind != KindDeadLetter && (errs[i] != nil || !o.Kind.Acknowledges()) {
			return true
		}
	}
	return false
}
