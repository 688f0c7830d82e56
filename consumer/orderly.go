package consumer

// The path of a message, stage 6 of 9: in orderly mode, the own failure of a message on its last
// delivery becomes a dead letter (exhaust); the rest of the orderly differences are where they act
// (holdsBack in pass.go, publishOrderly in publish.go, keepAttempts and suspendFor in callback.go).
// Next: publish.go.

import (
	"fmt"

	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// Orderly consumption (Config.Orderly) differs from concurrent consumption in what the client can be
// told (the places named above act on it). Client facts (rocketmq-client-go/v2 consumeMessageOrderly
// and checkReconsumeTimes):
//
//   - only ConsumeSuccess and SuspendCurrentQueueAMoment are handled: ConsumeRetryLater falls through,
//     the loop takes the next messages and the failed one's offset is committed later, so it is lost;
//   - after a suspension the client sleeps the callback context's SuspendCurrentQueueTimeMillis, which is
//     -1 unless the callback sets it: no pause at all, the failing message would run in a hot loop;
//   - there is no DLQ delay level and no %RETRY%<group>: on a suspension the client raises each message's
//     ReconsumeTimes by one in memory, on the very *MessageExt it handed to the callback, and once a
//     message's ReconsumeTimes exceeds MaxReconsumeTimes it sends it to the broker's DLQ without a reason,
//     one delivery later than the concurrent path.
//
// So the consumer answers every failure SuspendCurrentQueueAMoment with SuspendTime set, publishes every
// dead letter itself (acknowledging only after the broker stored it), dead-letters a message still
// failing on its last delivery, and keeps each message's count (keepAttempts) so that only its own
// failures spend attempts and the client's reason-less send-back is never reached.

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
// later, without a reason. The letter's Cause is the retry's (panic, timeout), else "exhausted".
func exhaust(d *Delivery, o Outcome, err error) Outcome {
	if !d.LastAttempt() || !ownFailure(o, err) {
		return o
	}
	letter := DeadLetter(fmt.Sprintf("retries exhausted after %d deliveries: %s", d.Attempt+1, failureReason(o, err)))
	letter.Cause = o.Cause
	if letter.Cause == "" {
		letter.Cause = causelabel.Exhausted
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

// exhaustAll applies exhaust to each message that was handled (not held back).
func exhaustAll(ms []message) {
	for i := range ms {
		if m := &ms[i]; !m.waited {
			m.outcome = exhaust(m.d, m.outcome, m.err)
		}
	}
}
