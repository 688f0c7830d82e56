package dlq

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Cluster says how the dlq tools reach a RocketMQ cluster: name servers, the namespace the consumer
// group lives in, and ACL credentials.
type Cluster struct {
	// NameServers are "host:port" name server addresses. Required.
	NameServers []string
	// Namespace is the RocketMQ namespace of the consumer group and its topics ("" = none). With a
	// namespace ns, the group G's dead-letter topic is %DLQ%ns%G and a topic T is ns%T on the broker.
	Namespace string
	// Credentials are the ACL credentials; the zero value means no ACL.
	Credentials consumer.Credentials
}

// Validate returns an error naming the problem when no name server is given or one is blank, only one
// of the two keys is set, or the namespace is not a valid RocketMQ namespace (rmq.ValidateNamespace).
func (c Cluster) Validate() error {
	if len(c.NameServers) == 0 {
		return errors.New("dlq: cluster: no name server address given")
	}
	for _, ns := range c.NameServers {
		if strings.TrimSpace(ns) == "" {
			return errors.New("dlq: cluster: empty name server address")
		}
	}
	if (c.Credentials.AccessKey == "") != (c.Credentials.SecretKey == "") {
		return errors.New("dlq: cluster: credentials need both an access key and a secret key")
	}
	if err := rmq.ValidateNamespace(c.Namespace); err != nil {
		return fmt.Errorf("dlq: cluster: namespace: %w", err)
	}
	return nil
}
