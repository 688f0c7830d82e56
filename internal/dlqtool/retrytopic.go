package dlqtool

import (
	"context"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/admin"

	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// CheckRetryTopic returns an error naming the topic and the fix when group's retry topic in cluster, where
// every replay goes, has no writable queue: the group's consumers have not run on this cluster, and every
// send would fail.
func CheckRetryTopic(ctx context.Context, cluster topics.Cluster, group string) error {
	topic := rmq.NamespacedRetryTopic(cluster.Namespace, group)
	adm, err := admin.NewAdmin(AdminOptions(cluster)...)
	if err != nil {
		return fmt.Errorf("check %s: admin client: %w", topic, err)
	}
	defer func() { _ = adm.Close() }()
	queues, err := adm.FetchPublishMessageQueues(ctx, topic)
	if err == nil && len(queues) > 0 {
		return nil
	}
	return fmt.Errorf("%s, where replays of group %s go, has no writable queue (%v): start the group's consumers once, or create it: rmqguard topic ensure --queues 1 '%s'",
		topic, group, err, topic)
}
