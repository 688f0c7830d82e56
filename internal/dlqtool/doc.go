// Package dlqtool is the operator's DLQ tooling behind `rmqguard dlq` (cmd/rmqguard): it reads a consumer
// group's dead-letter queue, %DLQ%<group>, into Letters (Scan, Read), says what became of each (Statuses:
// the replay Audit and the dedup table), counts them (TakeCensus, which dlq.Monitor exports), writes and
// reads export files (WriteExport, ReadExportFile), makes a write-only DLQ readable (FixPerm) and replays
// letters to the group (Replay, claimed in the Audit first), one of them with a body the operator wrote
// (ReplayEdited). A cluster is a topics.Cluster (its Brokers
// are not used: every master is read); every topic and group name is built in full, namespace included.
//
// # Scans
//
// A scan is bounded: each readable queue is read from its min offset (older letters have expired) up to the
// max offset captured when the scan starts, so letters arriving meanwhile are not chased. Since/Until also
// narrow the offsets through the broker's search by store time (widened by ClockSkew either side); letters
// are then matched on FailedAt exactly. Reading an empty queue costs one short request, never a long-poll.
// ctx is checked between pulls; one pull cannot be interrupted (the client bounds it by 30 s). A scan's
// trouble short of failing — a queue or broker not readable, a pull error, ctx ending, the limit hit —
// returns what was read. FixPerm re-creates a write-only topic with the admin UPDATE_AND_CREATE_TOPIC request
// on the broker's master, which updates an existing topic.
//
// # Replay
//
// A replay goes to the group's retry topic, so that only that group receives it (the broker delivers a
// group's retry topic to that group alone); the client and the consumer restore RETRY_TOPIC as the
// visible topic. The names are already the broker's, so the producer must have no namespace option. The
// broker stores it with ReconsumeTimes 0, so the group's full retry budget applies again. A group that does
// not subscribe the topic cannot hand the message to a handler (the client retries it until it is
// dead-lettered again).
//
// # Edit, then replay
//
// ReplayEdited sends a letter whose body is what is wrong with a body the operator wrote: the letter's
// replay message with that body, under the same event ID and properties, so that dedup still applies (if
// the event was applied meanwhile, the edited copy is a duplicate). It claims the letter's audit row like a
// replay, writing in the same statement the editor, the time, the letter's body and the edited body: from
// then on the letter is superseded. A Replay of it is skipped as ReplaySkippedSuperseded, with Force too (the
// failure of other consoles: the edited and the original copy both sent). It is edited again only when
// that edit's send failed, or with Force while its send is uncertain; an edited copy that fails again is a
// new letter (RMQGUARD_REPLAY_OF names the original), edited or replayed in its own right. Of two edits
// (or an edit and a replay) of one letter at once, the claim lets one send.
package dlqtool
