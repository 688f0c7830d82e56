package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2"
	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// mysqlDuplicateKey is MySQL's ER_DUP_ENTRY.
const mysqlDuplicateKey = 1062

// startClient starts the client's own push consumer of group on b's topic from the first offset, with
// o.goroutines consume goroutines and one message per callback, handing each message to handle: a nil
// error acknowledges it, an error asks the broker to redeliver it later.
func startClient(env *environment, o options, b backlog, group string,
	handle func(ctx context.Context, m *primitive.MessageExt) error) (func(), error) {
	pc, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithGroupName(group),
		rmqconsumer.WithInstance(group),
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver(env.nameServers)),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
		rmqconsumer.WithConsumeGoroutineNums(o.goroutines),
	)
	if err != nil {
		return nil, fmt.Errorf("push consumer %s: %w", group, err)
	}
	err = pc.Subscribe(b.topic, rmqconsumer.MessageSelector{},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
			for _, m := range msgs {
				if err := handle(ctx, m); err != nil {
					return rmqconsumer.ConsumeRetryLater, nil
				}
			}
			return rmqconsumer.ConsumeSuccess, nil
		})
	if err != nil {
		return nil, fmt.Errorf("push consumer %s: subscribe: %w", group, err)
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("push consumer %s: start: %w", group, err)
	}
	return func() { _ = pc.Shutdown() }, nil
}

// startRaw is the ceiling: the client's push consumer with a handler that only counts.
func startRaw(_ context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	return startClient(env, o, b, group, func(_ context.Context, m *primitive.MessageExt) error {
		tr.handled(m.GetProperty("EVENT_ID"))
		return nil
	})
}

// startBaseline is what a user would write by hand: per message one transaction on sqlx that inserts a
// dedup row into a table shaped like processed_event (a duplicate key means already processed: the
// message is acknowledged) and one business row, then commits.
func startBaseline(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	dedupTable, bizTable := tableName(group, "dedup"), tableName(group, "orders")
	if err := createDedupTable(ctx, env, dedupTable); err != nil {
		return nil, err
	}
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	return startClient(env, o, b, group, func(ctx context.Context, m *primitive.MessageExt) error {
		id := m.GetProperty("EVENT_ID")
		if err := baselineTx(ctx, env.db, dedupTable, bizTable, group, id, m); err != nil {
			return err
		}
		tr.handled(id)
		return nil
	})
}

// baselineTx is the baseline's transaction of one message.
func baselineTx(ctx context.Context, db *sqlx.DB, dedupTable, bizTable, group, id string, m *primitive.MessageExt) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, `INSERT INTO `+dedupTable+`
		(consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status)
		VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), 'SUCCESS')`,
		group, id, m.GetProperty("EVENT_TYPE"), m.GetProperty("AGGREGATE_ID"), m.Topic, m.MsgId)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == mysqlDuplicateKey {
		return nil // already processed
	}
	if err != nil {
		return fmt.Errorf("insert dedup row of %s: %w", id, err)
	}
	if err := insertBusinessRow(ctx, tx, bizTable, id); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", id, err)
	}
	return nil
}
