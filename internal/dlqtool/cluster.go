package dlqtool

import (
	"github.com/apache/rocketmq-client-go/v2/admin"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// The client options built here from a topics.Cluster carry the name servers and the credentials, never
// the client's namespace option: the Go client's producer prefixes every topic with "ns%" unconditionally
// (so "%DLQ%G" would become "ns%%DLQ%G", a topic nobody reads) and its admin ignores the namespace when
// creating topics. Instead every name is built in full (irmq.InNamespace, NamespacedDLQTopic,
// NamespacedRetryTopic, and the group of the clients) and passed to the client as the broker spells it.
// The cluster's Brokers are not used: the DLQ is read on every master the name servers list.

// resolver returns the name server resolver of c.
func resolver(c topics.Cluster) primitive.NsResolver {
	return primitive.NewPassthroughResolver(c.NameServers)
}

// pullConsumerOptions returns the options of a pull consumer of group (given without namespace; it is
// put into the namespace): name servers, group and, when set, credentials. Append your own (e.g.
// rmq.WithInstance, unique per client). Pass topics in full (dlqTopic).
func pullConsumerOptions(c topics.Cluster, group string) []rmq.Option {
	opts := []rmq.Option{rmq.WithNsResolver(resolver(c)), rmq.WithGroupName(irmq.InNamespace(c.Namespace, group))}
	if !irmq.Credentials(c.Credentials).IsZero() {
		opts = append(opts, rmq.WithCredentials(irmq.Credentials(c.Credentials).Client()))
	}
	return opts
}

// ProducerOptions returns the options of a producer of group in c (group given without namespace):
// name servers, group and, when set, credentials, never a namespace option. Append your own (instance
// name, retries, send timeout). Messages must name their topic in full (irmq.InNamespace and the like).
func ProducerOptions(c topics.Cluster, group string) []producer.Option {
	opts := []producer.Option{producer.WithNsResolver(resolver(c)), producer.WithGroupName(irmq.InNamespace(c.Namespace, group))}
	if !irmq.Credentials(c.Credentials).IsZero() {
		opts = append(opts, producer.WithCredentials(irmq.Credentials(c.Credentials).Client()))
	}
	return opts
}

// AdminOptions returns the options of an admin client of c: name servers and, when set, credentials.
// Topic names given to it must be in full.
func AdminOptions(c topics.Cluster) []admin.AdminOption {
	opts := []admin.AdminOption{admin.WithResolver(resolver(c))}
	if !irmq.Credentials(c.Credentials).IsZero() {
		opts = append(opts, admin.WithCredentials(irmq.Credentials(c.Credentials).Client()))
	}
	return opts
}
