package rmq

import (
	"context"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Sender is the sending part of the client's producer (a rocketmq.Producer is one): what the consumer's
// own dead-letter producer, dlq.NewPublisher and the DLQ replay send through.
type Sender interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// StartProducer creates and starts a producer in producer group group on nameServers, with an instance
// name unique to this process and call (clients are shared per ClientID) and 2 internal send retries.
// The caller shuts it down. Errors from creating or starting it are wrapped.
//
// opts give credentials and a namespace: the group becomes "ns%group", but the producer gets no namespace
// option, so messages must name their topic as the broker does (InNamespace, "%DLQ%ns%G"); a
// letter.Message of a namespaced origin already does.
func StartProducer(nameServers []string, group string, opts ...Option) (rocketmq.Producer, error) {
	if err := validateNameServers(nameServers); err != nil {
		return nil, fmt.Errorf("producer %s: %w", group, err)
	}
	p, err := rocketmq.NewProducer(append(newAccess(opts).producerOptions(nameServers, group),
		producer.WithInstanceName(instanceName(group)),
		producer.WithRetry(2),
	)...)
	if err != nil {
		return nil, fmt.Errorf("producer %s: new: %w", group, err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("producer %s: start: %w", group, err)
	}
	return p, nil
}
