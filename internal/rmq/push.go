package rmq

import (
	"context"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// PushConsumer is the part of the client's push consumer the consumer package uses; its tests supply a
// fake through consumer.WithPushConsumer.
type PushConsumer interface {
	Start() error
	Shutdown() error
	// Suspend stops pulling (Shutdown, and the store health gate while the store is down).
	Suspend()
	// Resume restarts pulling after Suspend (the store health gate when the store is back).
	Resume()
	Subscribe(topic string, selector consumer.MessageSelector,
		f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error
	// GetOffsetDiffMap returns, per topic, how many messages the queues this process holds are behind
	// (max offset minus consumer offset, summed); the lag poller reads it.
	GetOffsetDiffMap() map[string]int64
}
