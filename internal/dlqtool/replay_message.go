package dlqtool

import (
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Provenance is what a replay adds to every message it sends (the letter.PropReplay* properties).
type Provenance struct {
	// ReplayID identifies the replay run (one per `rmqguard dlq replay` invocation).
	ReplayID string
	// Operator names who ran the replay.
	Operator string
	// At is when the message was sent.
	At time.Time
}

// reservedProperties are the client's and broker's own properties. A replay does not copy them from the
// letter: they describe the letter's position, its transaction or reply state, its retry bookkeeping or
// a delivery delay, and the client or broker sets them anew (UNIQ_KEY: a replay is a new message).
var reservedProperties = map[string]bool{
	primitive.PropertyUniqueClientMessageIdKeyIndex: true, primitive.PropertyWaitStoreMsgOk: true,
	primitive.PropertyDelayTimeLevel: true, primitive.PropertyRetryTopic: true,
	primitive.PropertyRealTopic: true, primitive.PropertyRealQueueId: true,
	primitive.PropertyTransactionPrepared: true, primitive.PropertyProducerGroup: true,
	primitive.PropertyMinOffset: true, primitive.PropertyMaxOffset: true,
	primitive.PropertyOriginMessageId: true, primitive.PropertyTransferFlag: true,
	primitive.PropertyCorrectionFlag: true, primitive.PropertyMQ2Flag: true,
	primitive.PropertyReconsumeTime: true, primitive.PropertyMsgRegion: true,
	primitive.PropertyTraceSwitch: true, primitive.PropertyMaxReconsumeTimes: true,
	primitive.PropertyConsumeStartTime: true, primitive.PropertyTranscationPreparedQueueOffset: true,
	primitive.PropertyTranscationCheckTimes: true, primitive.PropertyCheckImmunityTimeInSeconds: true,
	primitive.PropertyTransactionID: true, primitive.PropertyCorrelationID: true,
	primitive.PropertyMessageReplyToClient: true, primitive.PropertyMessageTTL: true,
	primitive.PropertyReplyMessageArriveTime: true, primitive.PropertyMsgType: true,
	primitive.PropertyCluster: true,
	// Broker-side properties the Go client has no constant for (RocketMQ 4.x/5.x MessageConst).
	"__STARTDELIVERTIME": true, "INNER_MULTI_DISPATCH": true, "INNER_MULTI_QUEUE_OFFSET": true,
	"INSTANCE_ID": true, "POP_CK": true, "1ST_POP_TIME": true, "INNER_NUM": true, "INNER_BASE": true,
	primitive.PropertyBuyerId: true, "POP_CK_OFFSET": true, "DUP_INFO": true, "EXTEND_UNIQ_INFO": true,
	"PUSH_REPLY_TIME": true, "__BORNHOST": true, "BORN_TIMESTAMP": true, "PROPERTY_FORWARD_QUEUE_ID": true,
	"REDIRECT": true, "TRACE_CONTEXT": true, "DLQ_ORIGIN_TOPIC": true, "DLQ_ORIGIN_MESSAGE_ID": true,
	// rmqguard's dead-letter metadata: it describes the letter, not the event; the audit row and
	// letter.PropReplayOf lead back to it. A replay that fails again gets fresh metadata.
	letter.PropReason: true, letter.PropOriginMsgID: true, letter.PropReconsumeTimes: true, letter.PropAt: true, letter.PropGroup: true,
	// Provenance of an earlier replay is replaced by this one's.
	letter.PropReplayID: true, letter.PropReplayOf: true, letter.PropReplayedAt: true, letter.PropReplayedBy: true,
}

// transientPropertyPrefix starts the broker's transient properties (RocketMQ 5.x).
const transientPropertyPrefix = "__RMQ.TRANSIENT."

// reservedProperty reports whether a replay drops property name from a letter: the client's and broker's
// own properties (offsets, real topic and queue, delay and TIMER_* properties, transaction and reply
// flags, UNIQ_KEY, retry bookkeeping), rmqguard's dead-letter metadata, and earlier replay provenance.
func reservedProperty(name string) bool {
	// TIMER_DELIVER_MS, TIMER_DELAY_SEC, … would make the broker hold the replay back as a timer message.
	// __RMQ.TRANSIENT.* are the broker's per-read flags, never the event's.
	return reservedProperties[name] || strings.HasPrefix(name, "TIMER_") || strings.HasPrefix(name, transientPropertyPrefix)
}

// ReplayMessage builds the message that replays l to group in namespace ns ("" = none): topic %RETRY%<group>
// (%RETRY%<ns>%<group>) with RETRY_TOPIC set to topic (<ns>%<topic>), the letter's body, TAGS, KEYS and
// non-reserved properties (reservedProperty), and prov as the letter.PropReplay* properties (PropReplayOf =
// l.StoreID). topic is the letter's origin or the operator's --target-topic, one group subscribes. Send it
// through a producer without a namespace option (ProducerOptions); see the package doc, "Replay".
func ReplayMessage(l Letter, ns, group, topic string, prov Provenance) *primitive.Message {
	msg := primitive.NewMessage(rmq.NamespacedRetryTopic(ns, group), l.Body)
	for k, v := range l.Properties {
		if !reservedProperty(k) {
			msg.WithProperty(k, v)
		}
	}
	if msg.GetTags() == "" && l.Tags != "" {
		msg.WithTag(l.Tags)
	}
	if msg.GetKeys() == "" && l.Keys != "" {
		msg.WithProperty(primitive.PropertyKeys, l.Keys)
	}
	msg.WithProperty(primitive.PropertyRetryTopic, rmq.InNamespace(ns, topic))
	msg.WithProperty(letter.PropReplayID, prov.ReplayID)
	msg.WithProperty(letter.PropReplayOf, l.StoreID)
	msg.WithProperty(letter.PropReplayedAt, prov.At.UTC().Format(time.RFC3339Nano))
	msg.WithProperty(letter.PropReplayedBy, prov.Operator)
	return msg
}

// routableTopic reports whether topic may be the visible topic of a replay: not empty, and not a
// %RETRY% or %DLQ% topic (a handler must never see those, F18).
func routableTopic(topic string) bool {
	return topic != "" && !strings.HasPrefix(topic, rmq.RetryTopicPrefix) &&
		!strings.HasPrefix(topic, rmq.DLQTopicPrefix)
}
