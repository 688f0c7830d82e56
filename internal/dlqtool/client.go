package dlqtool

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"

	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// The functions in this file are the one place where the dlq tools turn a topics.Cluster into client options and
// topic names; namespace and ACL handling change here only.

// dlqTopic returns group's dead-letter topic as the broker names it (irmq.NamespacedDLQTopic): %DLQ%<group>, or
// %DLQ%<ns>%<group> within the namespace ns.
func dlqTopic(c topics.Cluster, group string) string {
	return irmq.NamespacedDLQTopic(c.Namespace, group)
}

// readerGroup is the consumer group every DLQ read pulls in. It is one fixed name: the broker
// (autoCreateSubscriptionGroup) persists each new group it sees and creates its %RETRY% topic, so a name per
// run would leave a group and a topic behind on the cluster with every command; a fixed name can also be
// granted under ACL. Sharing it is safe: reads use Assign mode (no rebalance) and never commit an offset.
const readerGroup = "rmqguard-dlq-reader"

// newPullConsumer starts a pull consumer for reading topic (the broker's full name, namespace included) in
// readerGroup, so that no real group's offsets move (it never commits any), with an instance name of its own
// (clients are shared per instance). The caller shuts it down.
func newPullConsumer(c topics.Cluster, topic string) (rocketmq.PullConsumer, error) {
	suffix := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pc, err := rocketmq.NewPullConsumer(append(pullConsumerOptions(c, readerGroup),
		rmq.WithInstance(readerGroup+"-"+suffix))...)
	if err != nil {
		return nil, fmt.Errorf("new pull consumer: %w", err)
	}
	// Assign mode with no queue, not Subscribe: the client then never rebalances this consumer, whose
	// rebalance would read the group field that every PullFrom rewrites (a data race in the client,
	// consumer/pull_consumer.go:521), and no background pulling starts. PullFrom names its queue itself.
	if err := pc.Assign(topic, nil); err != nil {
		return nil, fmt.Errorf("assign %s: %w", topic, err)
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("start pull consumer: %w", err)
	}
	return pc, nil
}
