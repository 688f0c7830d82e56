// Package letter builds and sends the dead letters rmqguard publishes, and names the properties that
// rmqguard's dead letters and replays carry; the consumer and dlq packages use it. It imports only
// internal/rmq and internal/body of this module.
//
// A dead letter goes to %DLQ%<group> (%DLQ%<namespace>%<group> in a namespace, the broker's name: send it
// through a producer without a namespace option) with the original body, tag, KEYS and user properties,
// RETRY_TOPIC set to the original topic (in the namespace, as the broker writes it, so it reads like the
// broker's own dead letters), and rmqguard's metadata: PropReason, PropOriginMsgID, PropReconsumeTimes,
// PropAt and PropGroup. A body that is still compressed is sent as it is, with body.PropSysFlag naming its
// SysFlag. The client's and broker's own properties are not copied: they are set anew, or describe the
// original's position. dlqtool.Letter (the operator's CLI) reads the metadata back.
//
// `rmqguard dlq replay` adds PropReplayID, PropReplayOf, PropReplayedAt and PropReplayedBy to every message
// it sends back from a DLQ; a message that carries PropReplayID is a replay (its duplicates are counted
// with cause "replay").
package letter
