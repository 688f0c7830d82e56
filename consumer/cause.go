package consumer

// Cause refines an Outcome with why it happened, from a small fixed set that labels metrics; its meaning
// depends on the Kind (a duplicate's cause, a dead letter's reason class, a retry's or a takeover's). The
// empty Cause means not known. See the package doc, "Cause".
type Cause string

// Causes of a duplicate (KindDuplicate).
const (
	// CauseRedelivery: the same message came again (its message ID is the one the dedup row recorded):
	// the broker or the consumer side, e.g. a lost offset commit, a consume-timeout resend, a rebalance, a
	// retried batch.
	CauseRedelivery Cause = "redelivery"
	// CauseResend: a new message (another message ID) carrying an event ID already processed: the producer
	// sent the event again.
	CauseResend Cause = "resend"
	// CauseReplay: a message carrying replay provenance (the RMQGUARD_REPLAY_ID property) whose event was
	// already processed.
	CauseReplay Cause = "replay"
	// CauseUnknown: a duplicate whose cause the chain could not determine (its dedup row could not be read,
	// a fast path that did not keep the message ID, the handler's own finding). The consumer reports it for
	// every duplicate without one of the three causes above: the message alone cannot tell them apart (a
	// redelivery after a lost offset commit has ReconsumeTimes 0, a re-send retried by the broker has more).
	CauseUnknown Cause = "unknown"
)

// Reason classes of a dead letter (KindDeadLetter, KindDeadLettered).
const (
	// CausePermanent: the chain decided the message can never succeed (a retry.Permanent error, a MySQL
	// data error, or a handler's own consumer.DeadLetter).
	CausePermanent Cause = "permanent"
	// CauseUnidentifiable: no business event ID could be extracted.
	CauseUnidentifiable Cause = "unidentifiable"
	// CauseVersionGap: the event's aggregate version stayed ahead of the stored one (an earlier event never
	// arrived) for as many deliveries as middleware.Version waits, and its gap policy dead-letters it.
	CauseVersionGap Cause = "version_gap"
	// CauseExhausted: the message was still failing on its last delivery (Attempt == MaxAttempts).
	CauseExhausted Cause = "exhausted"
	// CausePanic: the handler panicked on the message's last delivery.
	CausePanic Cause = "panic"
	// CauseTimeout: the handler missed its deadline on the message's last delivery.
	CauseTimeout Cause = "timeout"
	// CauseLeaseHeld: another delivery of the event held a live lease (middleware.Lease), so this one was
	// retried without running the handler.
	CauseLeaseHeld Cause = "lease_held"
	// CauseOther: any other reason; also what a Cause outside this set is reported as.
	CauseOther Cause = "other"
)

// CauseTakeover marks a processed message whose delivery took over the expired lease of an earlier one
// that never finished (middleware.Lease): that one may have made the handler's external call.
const CauseTakeover Cause = "takeover"

// knownDuplicateCause reports whether c is one of the duplicate causes the chain can determine
// (redelivery, resend, replay).
func knownDuplicateCause(c Cause) bool {
	return c == CauseRedelivery || c == CauseResend || c == CauseReplay
}

// letterClass returns c when it is one of the dead-letter reason classes, else CauseOther.
func letterClass(c Cause) Cause {
	switch c {
	case CausePermanent, CauseUnidentifiable, CauseVersionGap, CauseExhausted, CausePanic, CauseTimeout, CauseLeaseHeld:
		return c
	}
	return CauseOther
}
