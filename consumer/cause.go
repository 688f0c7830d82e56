package consumer

// Cause refines an Outcome with why it happened, from a small fixed set, so that it can label metrics
// (rmqguard_duplicates_total{cause}, rmqguard_dead_letters_total{reason}) without unbounded label values.
// Its meaning depends on the Kind:
//
//   - KindDuplicate: why the event came again: CauseRedelivery, CauseResend or CauseReplay;
//   - KindDeadLetter and KindDeadLettered: the dead letter's reason class: CausePermanent,
//     CauseUnidentifiable, CauseVersionGap, CauseExhausted, CausePanic, CauseTimeout or CauseOther;
//   - KindRetry: what the retry is for, when known (CausePanic, CauseTimeout); if the retry happens on the
//     message's last delivery the broker dead-letters it, and this becomes the letter's reason class.
//
// The empty Cause means "not known"; the consumer fills it in its final decision (see Decision).
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
	// CauseReplay: a message carrying replay provenance (PropReplayID) whose event was already processed.
	CauseReplay Cause = "replay"
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
	// CauseOther: any other reason; also what a Cause outside this set is reported as.
	CauseOther Cause = "other"
)

// duplicateCause returns the cause of a duplicate d whose chain did not name one: CauseReplay when d
// carries replay provenance, CauseRedelivery when it is a redelivery the broker counted (Attempt > 0,
// the same message answered ConsumeRetryLater before), else CauseResend. Without the dedup row's
// message ID a redelivery with Attempt 0 (a lost offset commit) cannot be told from a resend.
func duplicateCause(d *Delivery) Cause {
	switch {
	case d.Msg.GetProperty(PropReplayID) != "":
		return CauseReplay
	case d.Attempt > 0:
		return CauseRedelivery
	default:
		return CauseResend
	}
}

// letterClass returns c when it is one of the dead-letter reason classes, else CauseOther.
func letterClass(c Cause) Cause {
	switch c {
	case CausePermanent, CauseUnidentifiable, CauseVersionGap, CauseExhausted, CausePanic, CauseTimeout:
		return c
	}
	return CauseOther
}
