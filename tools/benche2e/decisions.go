package main

import (
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/metrics"
)

// lostBatchLine is the consumer's log line for a callback whose batch lost its shared transaction (a
// deadlock between batches, a lost connection) and that it handles once more (consumer/passes.go; e2e's
// F37 test counts the same line).
const lostBatchLine = "the batch's shared transaction was lost; handling the batch once more in a new one"

// consumerCounts count what an rmqguard variant's consumer decided during one drain, from its own
// reports: its final decisions (consumer.Observer) and its lost-batch log line.
type consumerCounts struct {
	batch int // consumer.Config.BatchSize of the drain
	// lost counts callbacks whose batch lost its shared transaction (lostBatchLine).
	lost atomic.Int64
	// retries counts decisions after which the message comes back: not acknowledged (retry, store
	// unavailable, no outcome), or acknowledged by its own outcome with its batch retried.
	retries atomic.Int64
	// deadLetters counts decisions that dead-lettered the message (by the consumer or the broker).
	deadLetters atomic.Int64
}

// counts are a consumerCounts' figures at the end of a drain.
type counts struct {
	batch                     int
	lost, retries, deadLetter int64
}

// snapshot returns c's figures; nil for a nil c (a variant without rmqguard's consumer).
func (c *consumerCounts) snapshot() *counts {
	if c == nil {
		return nil
	}
	return &counts{batch: c.batch, lost: c.lost.Load(), retries: c.retries.Load(), deadLetter: c.deadLetters.Load()}
}

// decided counts dec and reports whether the message is handled for good: acknowledged, its batch too.
func (c *consumerCounts) decided(dec consumer.Decision) bool {
	k := dec.Outcome.Kind
	switch {
	case k == consumer.KindDeadLetter || k == consumer.KindDeadLettered:
		c.deadLetters.Add(1)
	case !k.Acknowledges() || dec.BatchRetried:
		c.retries.Add(1)
	}
	return k.Acknowledges() && !dec.BatchRetried
}

// observer is the consumer's Observer of a drain: the metrics, and each final decision counted in c and,
// when it handled the message for good, reported to tr.
type observer struct {
	*metrics.Metrics
	c  *consumerCounts
	tr *tracker
}

// Decided implements consumer.Observer.
func (o observer) Decided(d *consumer.Delivery, dec consumer.Decision) {
	o.Metrics.Decided(d, dec)
	if o.c.decided(dec) {
		o.tr.handled(d.Msg.GetProperty("EVENT_ID"))
	}
}

// logger returns the consumer's logger of a drain: it writes nothing and counts lostBatchLine in c.lost.
func (c *consumerCounts) logger() *zap.Logger { return zap.New(lostBatchCore{c}) }

// lostBatchCore is a zapcore.Core that counts the entries with lostBatchLine's message and drops the rest.
type lostBatchCore struct{ c *consumerCounts }

func (l lostBatchCore) Enabled(lvl zapcore.Level) bool    { return lvl >= zapcore.InfoLevel }
func (l lostBatchCore) With([]zapcore.Field) zapcore.Core { return l }
func (l lostBatchCore) Sync() error                       { return nil }

func (l lostBatchCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == lostBatchLine && l.Enabled(e.Level) {
		return ce.AddCore(e, l)
	}
	return ce
}

func (l lostBatchCore) Write(zapcore.Entry, []zapcore.Field) error {
	l.c.lost.Add(1)
	return nil
}
