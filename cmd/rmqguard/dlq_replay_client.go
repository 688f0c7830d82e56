package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// startReplayProducer starts the producer that sends the replays, with the cluster's name servers and
// credentials (names are passed in full, so it has no namespace option), and no internal send retry: a
// failed send is recorded as failed and a later run retries it.
func startReplayProducer(cluster topics.Cluster) (rocketmq.Producer, error) {
	opts := append(dlqtool.ProducerOptions(cluster, "rmqguard-dlq-replay"),
		producer.WithInstanceName(fmt.Sprintf("rmqguard-dlq-replay-%d-%d", os.Getpid(), time.Now().UnixNano())),
		producer.WithRetry(0))
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		return nil, fmt.Errorf("replay producer: new: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("replay producer: start: %w", err)
	}
	return p, nil
}

// checkRetryTopic returns an error naming the topic and the fix when the group's retry topic, where every
// replay goes, has no writable route: the group's consumers have not run on this cluster, and every send
// would fail.
func checkRetryTopic(ctx context.Context, cluster topics.Cluster, group string) error {
	topic := rmq.NamespacedRetryTopic(cluster.Namespace, group)
	adm, err := admin.NewAdmin(dlqtool.AdminOptions(cluster)...)
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

// replayAudit returns the MySQL audit; in a dry run before the audit table exists, an empty audit (nothing
// was ever replayed), so that a dry run creates nothing.
func replayAudit(ctx context.Context, db *sqlx.DB, dryRun bool) (dlqtool.Audit, error) {
	if dryRun {
		return readAudit(ctx, db)
	}
	return dlqtool.NewMySQLAudit(db)
}
