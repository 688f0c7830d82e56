package rmqadmin

import (
	"fmt"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// StartProducer creates and starts a producer in producer group group on nameServers, with an instance
// name unique to this process and call (clients are shared per ClientID) and 2 internal send retries.
// The caller shuts it down. Errors from creating or starting it are wrapped.
func StartProducer(nameServers []string, group string) (rocketmq.Producer, error) {
	if err := validateNameServers(nameServers); err != nil {
		return nil, fmt.Errorf("producer %s: %w", group, err)
	}
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(nameServers)),
		producer.WithGroupName(group),
		producer.WithInstanceName(instanceName(group)),
		producer.WithRetry(2),
	)
	if err != nil {
		return nil, fmt.Errorf("producer %s: new: %w", group, err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("producer %s: start: %w", group, err)
	}
	return p, nil
}
