package consumer

// The path of a message, stage 8 of 9: the callback's outcomes are combined and resolved into the answer
// (resolveOutcome, the one place a client result is made, for an unanswered callback too). Next: decision.go.

import (
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
)

// resolve makes the answer to a handled callback: its combined outcome resolved, and which messages spent
// an attempt (spentAttempts, on SuspendCurrentQueueAMoment only).
func (c *Consumer) resolve(ms []message) answer {
	o, err := combine(ms)
	a := answer{res: resolveOutcome(o, err, c.cfg.Orderly)}
	if a.res.Result == rmq.SuspendCurrentQueueAMoment {
		a.spent = spentAttempts(ms)
	}
	return a
}

// unanswered is the answer to a callback of n messages that must not be answered (see consume), once the
// client is down: a retry that is not the messages' failure, with no attempt spent. Concurrent:
// ConsumeRetryLater; orderly: SuspendCurrentQueueAMoment, so that nothing is skipped (the client dropped
// the queue's process queue in Shutdown, so the offset is not committed and the message comes back after
// a restart).
func (c *Consumer) unanswered(n int) answer {
	return answer{res: resolveOutcome(Retry(0, "consumer stopping"), errStopped, c.cfg.Orderly), spent: make([]bool, n)}
}

// spentAttempts reports, for each message, whether its own failure spent an attempt, from the chain's
// outcomes; a member that waited (not handled, see holdsBack) spent none.
func spentAttempts(ms []message) []bool {
	spent := make([]bool, len(ms))
	for i, m := range ms {
		spent[i] = !m.waited && ownFailure(m.chain, m.err)
	}
	return spent
}

// delayLevelDLQ is the DelayLevelWhenNextConsume value that makes the broker move a message straight to
// %DLQ%<group> instead of scheduling a retry (broker behaviour for a negative delay level).
const delayLevelDLQ = -1

// resolution is what the client is told about a message: the ConsumeResult and, for concurrent
// consumption, the DelayLevelWhenNextConsume to set on the ConsumeConcurrentlyContext.
type resolution struct {
	// Result is the client's ConsumeResult.
	Result rmq.ConsumeResult
	// DelayLevel is DelayLevelWhenNextConsume: 0 lets the broker choose, -1 dead-letters at once,
	// 1..18 picks a delay level. Meaningful only when Result is ConsumeRetryLater.
	DelayLevel int
}

// resolveOutcome is the one place an Outcome becomes a client result (err is the chain's error):
// acknowledging kinds → ConsumeSuccess, retry → ConsumeRetryLater with its delay level, dead letter →
// delayLevelDLQ; orderly consumption suspends the queue instead of retrying. See the package doc,
// "Answer".
func resolveOutcome(o Outcome, err error, orderly bool) resolution {
	kind := o.Kind
	if err != nil && kind.Acknowledges() {
		kind = KindRetry
	}
	if kind.Acknowledges() {
		return resolution{Result: rmq.ConsumeSuccess}
	}
	if orderly {
		return resolution{Result: rmq.SuspendCurrentQueueAMoment}
	}
	switch kind {
	case KindDeadLetter:
		return resolution{Result: rmq.ConsumeRetryLater, DelayLevel: delayLevelDLQ}
	case KindRetry:
		if o.Kind == KindRetry && o.DelayLevel > 0 {
			return resolution{Result: rmq.ConsumeRetryLater, DelayLevel: o.DelayLevel}
		}
	}
	return resolution{Result: rmq.ConsumeRetryLater}
}

// combine folds the outcomes of a batch into one: the client acknowledges or retries a batch as a
// whole (AckIndex is ignored), so any message that needs a retry makes the whole batch a retry, at the
// largest delay level any member asked for; the messages that already committed come back as duplicates.
// An unavailable member makes the batch a retry too. A batch whose only failures are dead letters
// is dead-lettered as a whole only when it holds one message; in a larger batch a dead letter is retried
// (the broker moves it to the DLQ after MaxReconsumeTimes) so that its successful neighbours are not
// dead-lettered with it.
func combine(ms []message) (Outcome, error) {
	if len(ms) == 1 {
		return ms[0].outcome, ms[0].err
	}
	var firstErr error
	worst := Outcome{Kind: KindProcessed}
	for _, m := range ms {
		o := m.outcome
		if m.err != nil && firstErr == nil {
			firstErr = m.err
		}
		if m.err == nil && o.Kind.Acknowledges() {
			continue
		}
		// The batch waits as long as its slowest member asked to.
		delay := worst.DelayLevel
		if o.Kind == KindRetry && o.DelayLevel > delay {
			delay = o.DelayLevel
		}
		worst = Retry(delay, o.Reason)
	}
	return worst, firstErr
}
