package consumer

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

// Properties rmqguard adds to a dead letter it publishes (DeadLetterMessage). The original's user
// properties, KEYS and tag are kept, and RETRY_TOPIC names the original topic (as on the broker's own
// dead letters). The dlq package reads them back (dlq.Letter).
const (
	// PropDeadLetterReason says why the message was dead-lettered, e.g. "unidentifiable message: …".
	PropDeadLetterReason = "RMQGUARD_DLQ_REASON"
	// PropDeadLetterOriginMsgID is the message ID (UNIQ_KEY) of the original message.
	PropDeadLetterOriginMsgID = "RMQGUARD_ORIGIN_MSG_ID"
	// PropDeadLetterReconsumeTimes is the original's ReconsumeTimes when it was dead-lettered.
	PropDeadLetterReconsumeTimes = "RMQGUARD_RECONSUME_TIMES"
	// PropDeadLetteredAt is the time of dead-lettering, RFC 3339 with nanoseconds, UTC.
	PropDeadLetteredAt = "RMQGUARD_DEAD_LETTERED_AT"
	// PropDeadLetterGroup is the consumer group that dead-lettered the message.
	PropDeadLetterGroup = "RMQGUARD_GROUP"
)

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

// DeadLetterMessage builds the dead letter of d: topic %DLQ%<group> (%DLQ%<namespace>%<group> when
// d.Namespace is set, the broker's name: send it through a producer without a namespace option), the
// original body, tag, KEYS and user properties, RETRY_TOPIC set to the original topic (in the namespace,
// as the broker writes it), and the PropDeadLetter* metadata with reason and at. A body that is still
// compressed (body.StoredCompression) is sent as it is, with body.PropSysFlag naming its SysFlag.
func DeadLetterMessage(d *Delivery, reason string, at time.Time) *primitive.Message {
	msg := primitive.NewMessage(rmq.NamespacedDLQTopic(d.Namespace, d.Group), d.Msg.Body)
	for k, v := range d.Msg.GetProperties() {
		if !systemProperty(k) && k != body.PropSysFlag {
			msg.WithProperty(k, v)
		}
	}
	if flag := body.StoredCompression(d.Msg); flag != 0 {
		// The producer cannot set the letter's SysFlag: the codec travels as a property.
		msg.WithProperty(body.PropSysFlag, strconv.Itoa(int(flag)))
	}
	msg.WithProperty(primitive.PropertyRetryTopic, rmq.InNamespace(d.Namespace, d.Topic))
	msg.WithProperty(PropDeadLetterReason, reason)
	msg.WithProperty(PropDeadLetterOriginMsgID, d.Msg.MsgId)
	msg.WithProperty(PropDeadLetterReconsumeTimes, strconv.Itoa(int(d.Msg.ReconsumeTimes)))
	msg.WithProperty(PropDeadLetteredAt, at.UTC().Format(time.RFC3339Nano))
	msg.WithProperty(PropDeadLetterGroup, d.Group)
	return msg
}

// Sender is the sending part of the client's producer.
type Sender interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// ErrDeadLetterNotStored means the broker answered a dead-letter send with a status other than SEND_OK
// (e.g. FLUSH_SLAVE_TIMEOUT): the letter may not survive, so the original is not acknowledged.
var ErrDeadLetterNotStored = errors.New("dead letter not stored by the broker")

// SendDeadLetter sends DeadLetterMessage(d, reason, at) through s and returns nil only when the broker
// answered SEND_OK. Errors wrap the send error, or ErrDeadLetterNotStored with the status.
func SendDeadLetter(ctx context.Context, s Sender, d *Delivery, reason string, at time.Time) error {
	msg := DeadLetterMessage(d, reason, at)
	res, err := s.SendSync(ctx, msg)
	if err != nil {
		return fmt.Errorf("dead letter: send %s to %s: %w", d.Msg.MsgId, msg.Topic, err)
	}
	if res == nil || res.Status != primitive.SendOK {
		status := "no result"
		if res != nil {
			status = strconv.Itoa(int(res.Status))
		}
		return fmt.Errorf("%w: %s to %s, status %s", ErrDeadLetterNotStored, d.Msg.MsgId, msg.Topic, status)
	}
	return nil
}
