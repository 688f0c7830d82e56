package consumer

import (
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// newNamespacedDelivery builds the Delivery of msg as the user sees it: the push consumer, given the
// namespace, delivers topics as "ns%T" (and the broker's RETRY_TOPIC says "ns%T"), so the namespace is
// taken off the topic; Group stays the group without namespace; Namespace is set for its dead letter.
func newNamespacedDelivery(cfg Config, msg *primitive.MessageExt) *Delivery {
	d := newDelivery(cfg.Group, msg)
	d.Namespace = cfg.Namespace
	d.Topic = irmq.WithoutNamespace(cfg.Namespace, d.Topic)
	return d
}

// clientOptions returns the push consumer's name server, group, namespace and credential options. The push
// consumer is given the namespace (rmq.WithNamespace): it prefixes the group and the subscribed topics
// itself and builds "%RETRY%ns%G" from the prefixed group, as the broker does.
func clientOptions(cfg Config) []rmq.Option {
	opts := []rmq.Option{
		rmq.WithGroupName(cfg.Group),
		rmq.WithNsResolver(primitive.NewPassthroughResolver(cfg.NameServers)),
	}
	if cfg.Namespace != "" {
		opts = append(opts, rmq.WithNamespace(cfg.Namespace))
	}
	if !irmq.Credentials(cfg.Credentials).IsZero() {
		opts = append(opts, rmq.WithCredentials(irmq.Credentials(cfg.Credentials).Client()))
	}
	return opts
}
