package dlqtool

import (
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// Letter is one message read from a consumer group's dead-letter queue, %DLQ%<group>, with what rmqguard
// and the broker recorded about its failure. It is the unit that list, show, export and replay work on,
// and the shape of one line of an export file (JSON, field names as tagged).
type Letter struct {
	// Group is the consumer group whose DLQ holds the letter.
	Group string `json:"group"`
	// Topic is the DLQ topic it was read from, %DLQ%<group> (with the namespace, if any).
	Topic string `json:"topic"`
	// Broker is the name of the broker (brokerName) whose share of the DLQ topic holds the letter: each
	// master broker holds its own %DLQ%<group>. "" in an export file of version 1.
	Broker string `json:"broker"`
	// QueueID and QueueOffset locate the letter in the broker's share of the DLQ topic.
	QueueID     int   `json:"queue_id"`
	QueueOffset int64 `json:"queue_offset"`
	// StoreID is the broker's ID of the stored letter (the offset message ID): unique per letter, also
	// when the same message was dead-lettered twice. Replay audits letters by it.
	StoreID string `json:"store_id"`
	// MsgID is the letter's message ID as consumers see it (UNIQ_KEY when set, else StoreID).
	MsgID string `json:"msg_id"`
	// OriginTopic is the business topic the message was consumed from (RETRY_TOPIC); "" when unknown.
	OriginTopic string `json:"origin_topic"`
	// OriginMsgID is the original message's ID (rmqguard's RMQGUARD_ORIGIN_MSG_ID, else the broker's
	// ORIGIN_MESSAGE_ID, else MsgID).
	OriginMsgID string `json:"origin_msg_id"`
	// EventID is the business event ID (the EVENT_ID property by default; see ScanOptions), "" if none.
	EventID string `json:"event_id"`
	// EventType is the business event type (the EVENT_TYPE property, else the tag), "" if none.
	EventType string `json:"event_type"`
	// Reason says why it was dead-lettered (RMQGUARD_DLQ_REASON); "" for the broker's own dead letters
	// (retries exhausted, reason not recorded).
	Reason string `json:"reason"`
	// Attempts is the ReconsumeTimes of the original when it was dead-lettered (0: it failed on its first
	// delivery): RMQGUARD_RECONSUME_TIMES when rmqguard published it, else the letter's own ReconsumeTimes minus
	// one, since the broker stores its dead-letter copy with ReconsumeTimes + 1 as it does for a retry.
	Attempts int `json:"attempts"`
	// FailedAt is when it was dead-lettered (RMQGUARD_DEAD_LETTERED_AT, else the broker's store time), UTC.
	FailedAt time.Time `json:"failed_at"`
	// BornAt is when the producer created the original message (the letter's born timestamp), UTC.
	BornAt time.Time `json:"born_at"`
	// Tags and Keys are the message's TAGS and KEYS.
	Tags string `json:"tags"`
	Keys string `json:"keys"`
	// Properties are all the letter's properties as stored (user and system ones), TAGS and KEYS included;
	// not the MIN_OFFSET/MAX_OFFSET the client adds when it pulls.
	Properties map[string]string `json:"properties"`
	// Body is the message body as stored (JSON encodes it as base64); when it is still compressed (an LZ4
	// or ZSTD body, or one that failed to decode) Properties["RMQGUARD_BODY_SYSFLAG"] holds its SysFlag.
	Body []byte `json:"body"`
}

// newLetter builds the Letter of m, read from group's DLQ topic.
func newLetter(group string, m *primitive.MessageExt) Letter {
	l := Letter{
		Group:       group,
		Topic:       m.Topic,
		Broker:      m.Queue.BrokerName,
		QueueID:     m.Queue.QueueId,
		QueueOffset: m.QueueOffset,
		StoreID:     m.OffsetMsgId,
		MsgID:       m.MsgId,
		OriginTopic: m.GetProperty(primitive.PropertyRetryTopic),
		Reason:      m.GetProperty(letter.PropReason),
		Attempts:    max(int(m.ReconsumeTimes)-1, 0),
		FailedAt:    time.UnixMilli(m.StoreTimestamp).UTC(),
		BornAt:      time.UnixMilli(m.BornTimestamp).UTC(),
		Tags:        m.GetTags(),
		Keys:        m.GetKeys(),
		Properties:  m.GetProperties(),
		Body:        m.Body,
	}
	// The client adds the queue's MIN_OFFSET and MAX_OFFSET to every message it pulls: read-time
	// decorations, not properties of the letter.
	delete(l.Properties, primitive.PropertyMinOffset)
	delete(l.Properties, primitive.PropertyMaxOffset)
	// A body still compressed (the broker's own dead letter of an LZ4 or ZSTD message keeps its SysFlag,
	// which the Letter has no field for) is described by body.PropSysFlag, so that an export
	// stays readable and a replay is decoded by the consumer.
	if flag := body.StoredCompression(m); flag != 0 {
		l.Properties[body.PropSysFlag] = strconv.Itoa(int(flag))
	}
	l.EventID = m.GetProperty("EVENT_ID")
	l.EventType = firstNonEmpty(m.GetProperty("EVENT_TYPE"), l.Tags)
	if l.MsgID == "" {
		l.MsgID = l.StoreID
	}
	l.OriginMsgID = firstNonEmpty(m.GetProperty(letter.PropOriginMsgID), m.GetProperty(primitive.PropertyOriginMessageId), l.MsgID)
	if n, err := strconv.Atoi(m.GetProperty(letter.PropReconsumeTimes)); err == nil {
		l.Attempts = n
	}
	if t, err := time.Parse(time.RFC3339Nano, m.GetProperty(letter.PropAt)); err == nil {
		l.FailedAt = t.UTC()
	}
	return l
}

// Property returns the letter's property name, or "".
func (l Letter) Property(name string) string { return l.Properties[name] }

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
