// Package causelabel holds the values of consumer.Outcome's Cause: why a message had its outcome, from a
// small fixed set that labels metrics (rmqguard_duplicates_total{cause}, rmqguard_dead_letters_total{reason})
// and the consumer's log line. The consumer package doc, "Cause", says which apply to which Kind.
package causelabel

// Causes of a duplicate (consumer.KindDuplicate).
const (
	// Redelivery: the same message came again (its message ID is the one the dedup row recorded).
	Redelivery = "redelivery"
	// Resend: a new message (another message ID) carrying an event ID already processed.
	Resend = "resend"
	// Replay: a message carrying replay provenance (the RMQGUARD_REPLAY_ID property).
	Replay = "replay"
	// Unknown: a duplicate whose cause could not be determined.
	Unknown = "unknown"
)

// Reason classes of a dead letter (consumer.KindDeadLetter, consumer.KindDeadLettered); Panic, Timeout
// and LeaseHeld also say what a retry is for.
const (
	// Permanent: the chain decided the message can never succeed.
	Permanent = "permanent"
	// Unidentifiable: no business event ID could be extracted.
	Unidentifiable = "unidentifiable"
	// VersionGap: the event's aggregate version stayed ahead of the stored one.
	VersionGap = "version_gap"
	// Exhausted: the message was still failing on its last delivery.
	Exhausted = "exhausted"
	// Panic: the handler panicked.
	Panic = "panic"
	// Timeout: the handler missed its deadline.
	Timeout = "timeout"
	// LeaseHeld: another delivery of the event held a live lease (middleware.Lease).
	LeaseHeld = "lease_held"
	// Other: any other reason; also what a cause outside this set is reported as.
	Other = "other"
)

// Takeover marks a processed message whose delivery took over the expired lease of an earlier one.
const Takeover = "takeover"
