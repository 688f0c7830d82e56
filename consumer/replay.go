package consumer

// Replay provenance: properties `rmqguard dlq replay` adds to every message it sends back from a DLQ. A
// message that carries PropReplayID is a replay (its duplicates are counted with cause "replay").
const (
	// PropReplayID identifies the replay run that sent the message (one ID per `dlq replay` invocation).
	PropReplayID = "RMQGUARD_REPLAY_ID"
	// PropReplayOf is the DLQ store ID (dlq.Letter.StoreID) of the letter that was replayed.
	PropReplayOf = "RMQGUARD_REPLAY_OF"
	// PropReplayedAt is when the replay sent the message, RFC 3339 with nanoseconds, UTC.
	PropReplayedAt = "RMQGUARD_REPLAYED_AT"
	// PropReplayedBy names who ran the replay (the --operator flag, else user@host).
	PropReplayedBy = "RMQGUARD_REPLAYED_BY"
)
