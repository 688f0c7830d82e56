// Package dlq routes messages to a consumer group's dead-letter queue, %DLQ%<group>, with the reason
// attached, and reads the DLQ back.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/consumer"
)

// Properties rmqguard adds to a dead letter it publishes. The original's user properties, KEYS and tag
// are kept, and RETRY_TOPIC names the original topic (as on the broker's own dead letters).
const (
	// PropReason says why the message was dead-lettered, e.g. "unidentifiable message: …".
	PropReason = "RMQGUARD_DLQ_REASON"
	// PropOriginMsgID is the message ID (UNIQ_KEY) of the original message.
	PropOriginMsgID = "RMQGUARD_ORIGIN_MSG_ID"
	// PropReconsumeTimes is the original's ReconsumeTimes when it was dead-lettered.
	PropReconsumeTimes = "RMQGUARD_RECONSUME_TIMES"
	// PropDeadLetteredAt is the time of dead-lettering, RFC 3339 with nanoseconds, UTC.
	PropDeadLetteredAt = "RMQGUARD_DEAD_LETTERED_AT"
	// PropGroup is the consumer group that dead-lettered the message.
	PropGroup = "RMQGUARD_GROUP"
)

// systemProperties are the client's and broker's own properties, which are not copied to a dead letter:
// the broker or client sets them anew, or they describe the original's position.
var systemProperties = map[string]bool{
	primitive.PropertyUniqueClientMessageIdKeyIndex: true, primitive.PropertyMinOffset: true,
	primitive.PropertyMaxOffset: true, primitive.PropertyConsumeStartTime: true, primitive.PropertyRealTopic: true,
	primitive.PropertyRealQueueId: true, primitive.PropertyDelayTimeLevel: true, primitive.PropertyTransactionPrepared: true,
	primitive.PropertyWaitStoreMsgOk: true, primitive.PropertyProducerGroup: true, primitive.PropertyMsgRegion: true,
	primitive.PropertyTraceSwitch: true, primitive.PropertyCluster: true, primitive.PropertyOriginMessageId: true,
	primitive.PropertyRetryTopic: true, primitive.PropertyMaxReconsumeTimes: true, primitive.PropertyReconsumeTime: true,
}

// timerPropertyPrefix starts the broker's timer-message properties (TIMER_DELIVER_MS, TIMER_DELAY_SEC, …):
// copied to a dead letter they could make the broker hold it back as a delayed message.
const timerPropertyPrefix = "TIMER_"

// Producer is the part of the client's producer that Publisher uses.
type Producer interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// ErrNotStored means the broker answered a dead-letter send with a status other than SEND_OK.
var ErrNotStored = errors.New("dlq: broker did not store the dead letter")

// Publisher publishes dead letters to %DLQ%<group> with their reason; it is a consumer.DeadLetterSink.
// The topic must exist (the broker creates it on its first own dead letter; rmqguard's tooling creates it
// up front, readable); if it does not, DeadLetter fails and the consumer falls back to the broker's
// dead-lettering, so no message is lost either way.
type Publisher struct {
	producer Producer
	now      func() time.Time
}

// NewPublisher returns a Publisher sending through p, a started producer. It returns an error if p is nil.
func NewPublisher(p Producer) (*Publisher, error) {
	if p == nil {
		return nil, errors.New("dlq: NewPublisher: producer is nil")
	}
	return &Publisher{producer: p, now: time.Now}, nil
}

// DeadLetter sends a copy of d's message to %DLQ%<d.Group> and returns nil only when the broker answered
// SEND_OK. Errors wrap the send error, or ErrNotStored with the status.
func (p *Publisher) DeadLetter(ctx context.Context, d *consumer.Delivery, reason string) error {
	msg := Letter(d, reason, p.now())
	res, err := p.producer.SendSync(ctx, msg)
	if err != nil {
		return fmt.Errorf("dlq: send %s to %s: %w", d.Msg.MsgId, msg.Topic, err)
	}
	if res == nil || res.Status != primitive.SendOK {
		status := "no result"
		if res != nil {
			status = strconv.Itoa(int(res.Status))
		}
		return fmt.Errorf("%w: %s to %s, status %s", ErrNotStored, d.Msg.MsgId, msg.Topic, status)
	}
	return nil
}

// Letter builds the dead letter of d: topic %DLQ%<group>, the original body, tag, KEYS and user
// properties, RETRY_TOPIC set to the original topic, and the Prop* metadata with reason.
func Letter(d *consumer.Delivery, reason string, at time.Time) *primitive.Message {
	msg := primitive.NewMessage(consumer.DLQTopic(d.Group), d.Msg.Body)
	for k, v := range d.Msg.GetProperties() {
		if !systemProperties[k] && !strings.HasPrefix(k, timerPropertyPrefix) {
			msg.WithProperty(k, v)
		}
	}
	msg.WithProperty(primitive.PropertyRetryTopic, d.Topic)
	msg.WithProperty(PropReason, reason)
	msg.WithProperty(PropOriginMsgID, d.Msg.MsgId)
	msg.WithProperty(PropReconsumeTimes, strconv.Itoa(int(d.Msg.ReconsumeTimes)))
	msg.WithProperty(PropDeadLetteredAt, at.UTC().Format(time.RFC3339Nano))
	msg.WithProperty(PropGroup, d.Group)
	return msg
}
