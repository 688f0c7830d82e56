package letter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Properties rmqguard adds to a dead letter it publishes (Message).
const (
	// PropReason says why the message was dead-lettered, e.g. "unidentifiable message: …".
	PropReason = "RMQGUARD_DLQ_REASON"
	// PropOriginMsgID is the message ID (UNIQ_KEY) of the original message.
	PropOriginMsgID = "RMQGUARD_ORIGIN_MSG_ID"
	// PropReconsumeTimes is the original's ReconsumeTimes when it was dead-lettered.
	PropReconsumeTimes = "RMQGUARD_RECONSUME_TIMES"
	// PropAt is the time of dead-lettering, RFC 3339 with nanoseconds, UTC.
	PropAt = "RMQGUARD_DEAD_LETTERED_AT"
	// PropGroup is the consumer group that dead-lettered the message.
	PropGroup = "RMQGUARD_GROUP"
)

// Replay provenance: properties `rmqguard dlq replay` adds to every message it sends back from a DLQ.
const (
	// PropReplayID identifies the replay run that sent the message (one ID per `dlq replay` invocation).
	PropReplayID = "RMQGUARD_REPLAY_ID"
	// PropReplayOf is the DLQ store ID (dlqtool.Letter.StoreID) of the letter that was replayed.
	PropReplayOf = "RMQGUARD_REPLAY_OF"
	// PropReplayedAt is when the replay sent the message, RFC 3339 with nanoseconds, UTC.
	PropReplayedAt = "RMQGUARD_REPLAYED_AT"
	// PropReplayedBy names who ran the replay (the --operator flag, else user@host).
	PropReplayedBy = "RMQGUARD_REPLAYED_BY"
)

// ErrNotStored means the broker answered a dead-letter send with a status other than SEND_OK (e.g.
// FLUSH_SLAVE_TIMEOUT): the letter may not survive, so the original is not acknowledged.
var ErrNotStored = errors.New("dead letter not stored by the broker")

// Origin is the message a dead letter is made of, as a consumer group received it.
type Origin struct {
	// Msg is the message as delivered (its body decoded when rmqguard could decode it).
	Msg *primitive.MessageExt
	// Group and Topic are the consumer group and business topic without the namespace; Namespace is
	// the RocketMQ namespace, "" for none.
	Group, Topic, Namespace string
}

// systemProperty reports whether k is one of the client's and broker's own properties, which are not
// copied to a dead letter: the broker or client sets them anew, or they describe the original's position.
func systemProperty(k string) bool {
	switch k {
	case primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.PropertyMinOffset,
		primitive.PropertyMaxOffset, primitive.PropertyConsumeStartTime, primitive.PropertyRealTopic,
		primitive.PropertyRealQueueId, primitive.PropertyDelayTimeLevel, primitive.PropertyTransactionPrepared,
		primitive.PropertyWaitStoreMsgOk, primitive.PropertyProducerGroup, primitive.PropertyMsgRegion,
		primitive.PropertyTraceSwitch, primitive.PropertyCluster, primitive.PropertyOriginMessageId,
		primitive.PropertyRetryTopic, primitive.PropertyMaxReconsumeTimes, primitive.PropertyReconsumeTime:
		return true
	}
	// The broker's timer-message properties (TIMER_DELIVER_MS, TIMER_DELAY_SEC, …) would make it hold a
	// dead letter back as a delayed message.
	return strings.HasPrefix(k, "TIMER_")
}

// Message builds the dead letter of o with reason and at (see the package doc for what it carries).
func Message(o Origin, reason string, at time.Time) *primitive.Message {
	msg := primitive.NewMessage(rmq.NamespacedDLQTopic(o.Namespace, o.Group), o.Msg.Body)
	for k, v := range o.Msg.GetProperties() {
		if !systemProperty(k) && k != body.PropSysFlag {
			msg.WithProperty(k, v)
		}
	}
	if flag := body.StoredCompression(o.Msg); flag != 0 {
		// The producer cannot set the letter's SysFlag: the codec travels as a property.
		msg.WithProperty(body.PropSysFlag, strconv.Itoa(int(flag)))
	}
	msg.WithProperty(primitive.PropertyRetryTopic, rmq.InNamespace(o.Namespace, o.Topic))
	msg.WithProperty(PropReason, reason)
	msg.WithProperty(PropOriginMsgID, o.Msg.MsgId)
	msg.WithProperty(PropReconsumeTimes, strconv.Itoa(int(o.Msg.ReconsumeTimes)))
	msg.WithProperty(PropAt, at.UTC().Format(time.RFC3339Nano))
	msg.WithProperty(PropGroup, o.Group)
	return msg
}

// SendFunc is a producer's SendSync.
type SendFunc func(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)

// Send sends Message(o, reason, at) through send and returns nil only when the broker answered SEND_OK.
// Errors wrap the send error, or ErrNotStored with the status.
func Send(ctx context.Context, send SendFunc, o Origin, reason string, at time.Time) error {
	msg := Message(o, reason, at)
	res, err := send(ctx, msg)
	if err != nil {
		return fmt.Errorf("dead letter: send %s to %s: %w", o.Msg.MsgId, msg.Topic, err)
	}
	if res == nil || res.Status != primitive.SendOK {
		status := "no result"
		if res != nil {
			status = strconv.Itoa(int(res.Status))
		}
		return fmt.Errorf("%w: %s to %s, status %s", ErrNotStored, o.Msg.MsgId, msg.Topic, status)
	}
	return nil
}
