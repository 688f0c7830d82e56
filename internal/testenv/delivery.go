package testenv

import (
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// NewDelivery is the Delivery the consumer builds for msg in group: the original topic restored from
// RETRY_TOPIC when msg arrived on %RETRY%<group>, Attempt from ReconsumeTimes.
func NewDelivery(group string, msg *primitive.MessageExt) *consumer.Delivery {
	return &consumer.Delivery{Msg: msg, Group: group, Topic: rmq.OriginalTopic(msg), Attempt: int(msg.ReconsumeTimes)}
}
