package consumer

import (
	"context"
	"fmt"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/zap"
)

// Orderly consumption (Config.Orderly) differs from concurrent consumption in what the client can be
// told, and this file holds those differences. Client facts (rocketmq-client-go/v2 consumeMessageOrderly
// and checkReconsumeTimes):
//
//   - only ConsumeSuccess and SuspendCurrentQueueAMoment are handled: ConsumeRetryLater falls through,
//     the loop takes the next messages and the failed one's offset is committed later, so it is lost;
//   - after a suspension the client sleeps the callback context's SuspendCurrentQueueTimeMillis, which is
//     -1 unless the callback sets it: no pause at all, the failing message would run in a hot loop;
//   - there is no DelayLevelDLQ and no %RETRY%<group>: on a suspension the client raises each message's
//     ReconsumeTimes by one in memory, on the very *MessageExt it handed to the callback, and once a
//     message's ReconsumeTimes exceeds MaxReconsumeTimes it sends it to the broker's DLQ without a reason,
//     one delivery later than the concurrent path.
//
// So the consumer answers every failure SuspendCurrentQueueAMoment with SuspendTime set, publishes every
// dead letter itself (acknowledging only after the broker stored it), dead-letters a message still
// failing on its last delivery, and keeps each message's count (keepAttempts) so that only its own
// failures spend attempts and the client's reason-less send-back is never reached.

// unanswered is the answer to a callback that must not be answered (see consume), once the client is
// down: ConsumeRetryLater with ErrStopped in concurrent mode; in orderly mode SuspendCurrentQueueAMoment,
// so that nothing is skipped (the client dropped the queue's process queue in Shutdown, so the offset is
// not committed and the message comes back after a restart), with no attempt spent.
func (c *Consumer) unanswered(ctx context.Context, msgs []*primitive.MessageExt) (rmq.ConsumeResult, error) {
	if !c.cfg.Orderly {
		return rmq.ConsumeRetryLater, ErrStopped
	}
	c.keepAttempts(msgs, make([]bool, len(msgs)))
	c.suspendFor(ctx)
	return rmq.SuspendCurrentQueueAMoment, ErrStopped
}

// suspendFor sets SuspendTime on the orderly callback context ctx, the time the client pauses the queue
// after a SuspendCurrentQueueAMoment answer.
func (c *Consumer) suspendFor(ctx context.Context) {
	if oc, ok := primitive.GetOrderlyCtx(ctx); ok {
		oc.SuspendCurrentQueueTimeMillis = int(c.cfg.SuspendTime / time.Millisecond)
	}
}

// ownFailure reports whether the outcome is a failure of the message itself: a retry, an error, or the
// zero Outcome. An unavailable store is not (infrastructure), nor is a dead letter (its fate is decided;
// it only waits for its letter to be published).
func ownFailure(o Outcome, err error) bool {
	if err == nil && o.Kind.Acknowledges() {
		return false
	}
	return o.Kind != KindUnavailable && o.Kind != KindDeadLetter
}

// exhaust turns, in orderly mode, the own failure of a message on its last delivery (Attempt ==
// MaxAttempts) into a dead letter with the reason "retries exhausted after N deliveries: …", as
// middleware.Classify does in a chain that has it: the client would only send it to its DLQ one delivery
// later, without a reason. The letter's Cause is the retry's (panic, timeout), else CauseExhausted.
func exhaust(d *Delivery, o Outcome, err error) Outcome {
	if !d.LastAttempt() || !ownFailure(o, err) {
		return o
	}
	letter := DeadLetter(fmt.Sprintf("retries exhausted after %d deliveries: %s", d.Attempt+1, failureReason(o, err)))
	letter.Cause = o.Cause
	if letter.Cause == "" {
		letter.Cause = CauseExhausted
	}
	return letter
}

// failureReason says why a message failed: the outcome's reason, else the error's text, else the kind.
func failureReason(o Outcome, err error) string {
	if r := letterReason(o, err); r != "" {
		return r
	}
	return o.Kind.String()
}

// publishOrderly publishes the dead letter of a message delivered alone in orderly mode, through the
// DeadLetterSink or else the consumer's own producer, once. On success the outcome becomes
// KindDeadLettered (acknowledged); on failure a retry (the queue is suspended and the message handled
// again, its attempt not spent): never acknowledged without a DLQ entry.
func (c *Consumer) publishOrderly(d *Delivery, o Outcome, err error) (Outcome, error) {
	reason := letterReason(o, err)
	if sendErr := c.sendOnce(d, reason); sendErr != nil {
		c.log.Error("dead-letter publish failed; the queue is suspended and the message handled again",
			zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
			zap.Duration("suspend", c.cfg.SuspendTime), zap.Error(sendErr))
		retried := Retry(0, "dead-letter publish failed: "+sendErr.Error())
		retried.Cause = o.Cause
		return retried, err
	}
	return Outcome{Kind: KindDeadLettered, Reason: reason, Cause: o.Cause}, nil
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

// spentAttempts reports, for each message of a suspended callback, whether its own failure spent an
// attempt, from the chain's outcomes; a member that waited (not handled, see holdsBack) spent none.
func spentAttempts(chain []Outcome, errs []error, waited []bool) []bool {
	spent := make([]bool, len(chain))
	for i, o := range chain {
		spent[i] = !waited[i] && ownFailure(o, errs[i])
	}
	return spent
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
