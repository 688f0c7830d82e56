package consumer

import (
	"context"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/internal/letter"
)

// Sender is the sending part of the client's producer.
type Sender interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// origin is what d's dead letter is made of.
func (d *Delivery) origin() letter.Origin {
	return letter.Origin{Msg: d.Msg, Group: d.Group, Topic: d.Topic, Namespace: d.Namespace}
}
