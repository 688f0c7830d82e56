package consumer

// The path of a message, stage 7 of 9: the dead letters of a callback that will be acknowledged are
// published (through the DeadLetterSink or the consumer's own producer: letters.go). Next: resolve.go.

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// publishDeadLetters publishes the dead letters of a callback whose other messages are all acknowledged:
// alone, through the DeadLetterSink or the own producer (after WithDeadLetterSink(nil) the broker
// dead-letters it with the DLQ delay level), and in orderly mode always by the consumer (publishOrderly: there
// is no DLQ delay level there); in a batch, always by the consumer, because the broker would dead-letter
// the whole batch.
// It returns errStopped when the consumer is stopping and the callback must not be answered.
func (c *Consumer) publishDeadLetters(ms []message, w *outageWait) error {
	if needsRetry(ms) {
		return nil
	}
	for i := range ms {
		m := &ms[i]
		if m.outcome.Kind != KindDeadLetter {
			continue
		}
		if len(ms) == 1 {
			switch {
			case c.cfg.Orderly:
				c.publishOrderly(m)
			case c.publishAlone:
				c.publishDeadLetter(m)
			}
			continue
		}
		if err := c.publishInBatch(m, w); err != nil {
			return err
		}
		if m.outcome.Kind != KindDeadLettered {
			return nil // the batch is retried: the other letters would be published again
		}
	}
	return nil
}

// needsRetry reports whether some message of a batch, other than a dead letter, is not acknowledged.
func needsRetry(ms []message) bool {
	for _, m := range ms {
		if m.outcome.Kind != KindDeadLetter && (m.err != nil || !m.outcome.Kind.Acknowledges()) {
			return true
		}
	}
	return false
}

// letterReason is the reason a dead letter carries: the outcome's, else the error's text.
func letterReason(o Outcome, err error) string {
	if o.Reason == "" && err != nil {
		return err.Error()
	}
	return o.Reason
}

// publishDeadLetter publishes the dead letter of a message delivered alone (sendLetter), once. On
// success the outcome becomes KindDeadLettered (acknowledged); on failure the dead-letter outcome stays,
// so the broker's own DLQ takes the message (the DLQ delay level): nothing is lost, only the reason.
func (c *Consumer) publishDeadLetter(m *message) {
	d, reason := m.d, letterReason(m.outcome, m.err)
	if sendErr := c.sendOnce(d, reason); sendErr != nil {
		c.log.Error("dead-letter publish failed; falling back to the broker's DLQ", zap.String("group", d.Group),
			zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId), zap.Error(sendErr))
		return
	}
	m.outcome, m.err = Outcome{Kind: KindDeadLettered, Reason: reason, Cause: m.outcome.Cause}, nil
}

// publishOrderly publishes the dead letter of a message delivered alone in orderly mode, through the
// DeadLetterSink or else the consumer's own producer, once. On success the outcome becomes
// KindDeadLettered (acknowledged); on failure a retry (the queue is suspended and the message handled
// again, its attempt not spent): never acknowledged without a DLQ entry.
func (c *Consumer) publishOrderly(m *message) {
	d, reason := m.d, letterReason(m.outcome, m.err)
	if sendErr := c.sendOnce(d, reason); sendErr != nil {
		c.log.Error("dead-letter publish failed; the queue is suspended and the message handled again",
			zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
			zap.Duration("suspend", c.cfg.SuspendTime), zap.Error(sendErr))
		retried := Retry(0, "dead-letter publish failed: "+sendErr.Error())
		retried.Cause = m.outcome.Cause
		m.outcome = retried
		return
	}
	m.outcome, m.err = Outcome{Kind: KindDeadLettered, Reason: reason, Cause: m.outcome.Cause}, nil
}

// publishInBatch publishes the dead letter of a batch member, retrying with backoff (100 ms doubling to
// 5 s) until w's deadline: a failed publish is broker trouble, not the message's, and the DLQ delay level
// would dead-letter the processed neighbours too. Past the deadline the outcome becomes a retry (the
// batch is retried). It returns errStopped when the consumer is stopping: the batch must not be answered.
func (c *Consumer) publishInBatch(m *message, w *outageWait) error {
	d, reason := m.d, letterReason(m.outcome, m.err)
	backoff := gateMinBackoff
	for {
		sendCtx, cancelSend := context.WithTimeout(c.runCtx, deadLetterSendTimeout)
		sendErr := c.sendLetter(sendCtx, d, reason)
		cancelSend()
		if sendErr == nil {
			m.outcome, m.err = Outcome{Kind: KindDeadLettered, Reason: reason, Cause: m.outcome.Cause}, nil
			return nil
		}
		c.log.Warn("dead-letter publish failed in a batch; retrying", zap.String("group", d.Group),
			zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId), zap.Duration("backoff", backoff), zap.Error(sendErr))
		wait := min(backoff, time.Until(w.deadline()))
		if wait <= 0 {
			retried := Retry(0, "dead-letter publish failed: "+sendErr.Error())
			retried.Cause = m.outcome.Cause // the letter's class, should the broker dead-letter it on its last delivery
			m.outcome = retried
			return nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-c.gate.ctx.Done():
			timer.Stop()
			return errStopped
		case <-timer.C:
		}
		backoff = min(2*backoff, gateMaxBackoff)
	}
}
