package dlq

import (
	"github.com/apache/rocketmq-client-go/v2/admin"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// The client options a Cluster builds carry the name servers and the credentials, never the client's
// namespace option: the Go client's producer prefixes every topic with "ns%" unconditionally (so
// "%DLQ%G" would become "ns%%DLQ%G", a topic nobody reads) and its admin ignores the namespace when
// creating topics. Instead every name is built in full by the Cluster (Topic, DLQTopic,
// RetryTopic, and the group of its clients) and passed to the client as the broker spells it.

// Topic returns the business topic t as the broker names it in the cluster's namespace: "ns%t", or t
// without a namespace. A name already in the namespace is returned unchanged.
func (c Cluster) Topic(t string) string { return irmq.InNamespace(c.Namespace, t) }

// DLQTopic returns the dead-letter topic of consumer group (given without namespace) as the broker
// names it: "%DLQ%ns%group", or "%DLQ%group" without a namespace.
func (c Cluster) DLQTopic(group string) string {
	return irmq.NamespacedDLQTopic(c.Namespace, group)
}

// RetryTopic returns the retry topic of consumer group as the broker names it: "%RETRY%ns%group", or
// "%RETRY%group". A message sent there (with RETRY_TOPIC naming the original topic) reaches only that group.
func (c Cluster) RetryTopic(group string) string {
	return irmq.NamespacedRetryTopic(c.Namespace, group)
}

// resolver returns the name server resolver of the cluster.
func (c Cluster) resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver(c.NameServers)
}

// pullConsumerOptions returns the options of a pull consumer of group (given without namespace; it is
// put into the namespace): name servers, group and, when set, credentials. Append your own (e.g.
// rmq.WithInstance, unique per client). Pass topics in full: c.DLQTopic(g), c.Topic(t).
func (c Cluster) pullConsumerOptions(group string) []rmq.Option {
	opts := []rmq.Option{rmq.WithNsResolver(c.resolver()), rmq.WithGroupName(irmq.InNamespace(c.Namespace, group))}
	if !irmq.Credentials(c.Credentials).IsZero() {
		opts = append(opts, rmq.WithCredentials(irmq.Credentials(c.Credentials).Client()))
	}
	return opts
}

// ProducerOptions returns the options of a producer of group (given without namespace; it is put into
// the namespace): name servers, group and, when set, credentials. Append your own (instance name, retries,
// send timeout). Messages must name their topic in full: c.Topic(t), c.DLQTopic(g), c.RetryTopic(g).
func (c Cluster) ProducerOptions(group string) []producer.Option {
	opts := []producer.Option{producer.WithNsResolver(c.resolver()), producer.WithGroupName(irmq.InNamespace(c.Namespace, group))}
	if !irmq.Credentials(c.Credentials).IsZero() {
		opts = append(opts, producer.WithCredentials(irmq.Credentials(c.Credentials).Client()))
	}
	return opts
}

// AdminOptions returns the options of an admin client: name servers and, when set, credentials. Topic
// names given to it must be in full (c.Topic, c.DLQTopic, c.RetryTopic).
func (c Cluster) AdminOptions() []admin.AdminOption {
	opts := []admin.AdminOption{admin.WithResolver(c.resolver())}
	if !irmq.Credentials(c.Credentials).IsZero() {
		opts = append(opts, admin.WithCredentials(irmq.Credentials(c.Credentials).Client()))
	}
	return opts
}
