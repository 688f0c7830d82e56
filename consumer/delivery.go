package consumer

import (
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Delivery is one message as the middleware chain sees it: the client's message plus what the chain
// learns about it. Middlewares fill EventID, EventType, AggregateID and Version as they go.
type Delivery struct {
	// Msg is the message as the client delivered it, never nil, except that a body the client left
	// compressed (a Java 5.x producer's LZ4 or ZSTD body) is already decoded when the chain runs, with the
	// compressed flag cleared from Msg.SysFlag.
	Msg *primitive.MessageExt
	// Group is the consumer group, without the namespace (Config.Group).
	Group string
	// Namespace is the RocketMQ namespace the group and topics live in (Config.Namespace); "" = none.
	// Group and Topic are the names without it (the broker names them "ns%T").
	Namespace string
	// Topic is the business topic: the message's topic, or the RETRY_TOPIC property when the message
	// arrived on %RETRY%<group> (a redelivery); without the namespace.
	Topic string
	// Attempt is the message's ReconsumeTimes: 0 on the first delivery, n on the n-th redelivery.
	Attempt int
	// MaxAttempts is the consumer group's MaxReconsumeTimes (Config.MaxAttempts): the delivery with
	// Attempt == MaxAttempts is the last one; a retry asked for then ends in the DLQ. 0 when unknown.
	MaxAttempts int
	// EventID is the business event ID, the idempotency key: a stable ID the producer gives the business
	// event, never the RocketMQ message ID, because a business re-send of the same event gets a new message
	// ID and would be applied twice. Empty until extracted.
	EventID string
	// EventType names the kind of business event (e.g. "OrderCreated"); empty until extracted.
	EventType string
	// AggregateID names the business entity the event changes (e.g. an order number); optional.
	AggregateID string
	// Version is the aggregate version the event carries; 0 when unknown.
	Version int64
}

// newDelivery builds the Delivery of msg for consumer group: it restores the original topic from the
// RETRY_TOPIC property when msg arrived on %RETRY%<group>, and sets Attempt from ReconsumeTimes.
func newDelivery(group string, msg *primitive.MessageExt) *Delivery {
	return &Delivery{
		Msg:     msg,
		Group:   group,
		Topic:   rmq.OriginalTopic(msg),
		Attempt: int(msg.ReconsumeTimes),
	}
}

// LastAttempt reports whether this is the last delivery the broker makes before dead-lettering the message:
// MaxAttempts is known and Attempt has reached it.
func (d *Delivery) LastAttempt() bool { return d.MaxAttempts > 0 && d.Attempt >= d.MaxAttempts }
