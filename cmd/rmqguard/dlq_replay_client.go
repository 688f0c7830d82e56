package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
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

// replayAudit returns the MySQL audit; in a dry run before the audit table exists, an empty audit (nothing
// was ever replayed), so that a dry run creates nothing.
func replayAudit(ctx context.Context, db *sqlx.DB, dryRun bool) (dlqtool.Audit, error) {
	if dryRun {
		return readAudit(ctx, db)
	}
	return dlqtool.NewMySQLAudit(db)
}
