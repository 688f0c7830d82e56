package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// mysqlDuplicateKey is MySQL's ER_DUP_ENTRY.
const mysqlDuplicateKey = 1062

// memberFunc writes the rows of one message inside its callback's transaction.
type memberFunc func(ctx context.Context, tx *sqlx.Tx, m *primitive.MessageExt) error

// startBaseline is what a user would write by hand: per message one transaction on sqlx that inserts a
// dedup row into a table shaped like processed_event (a duplicate key means already processed: the
// message is acknowledged) and one business row, then commits.
func startBaseline(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	return startHandwritten(ctx, env, o, b, group, tr, 1)
}

// startHandwrittenBatch is what a user would write by hand for batches: the baseline's dedup and business
// rows of every message of a callback (up to batchSize, as rmqguard-batch) in one transaction, without
// savepoints: a failing message fails and redelivers the whole callback.
func startHandwrittenBatch(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	return startHandwritten(ctx, env, o, b, group, tr, batchSize)
}

// startHandwritten creates the hand-written consumer's dedup and business tables and drains b with batch
// messages per callback and transaction.
func startHandwritten(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker, batch int) (func(), error) {
	dedupTable, bizTable := tableName(group, "dedup"), tableName(group, "orders")
	if err := createDedupTable(ctx, env, dedupTable); err != nil {
		return nil, err
	}
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	return startTxPerCallback(env, o, b, group, tr, batch, dedupThenBusiness(dedupTable, bizTable, group))
}

// startBatchCeiling is the ceiling of any batch dedup design with this handler: one transaction per
// callback of up to batchSize messages holding only their business rows, no dedup at all.
func startBatchCeiling(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	bizTable := tableName(group, "orders")
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	return startTxPerCallback(env, o, b, group, tr, batchSize, func(ctx context.Context, tx *sqlx.Tx, m *primitive.MessageExt) error {
		return insertBusinessRow(ctx, tx, bizTable, m.GetProperty("EVENT_ID"))
	})
}

// startTxPerCallback drains b with the client's push consumer, batch messages per callback, each callback
// one transaction on the application's pool (env.db): BEGIN, member for each message in order, COMMIT;
// then each message is reported to tr. A member's error rolls the whole callback back for a redelivery.
func startTxPerCallback(env *environment, o options, b backlog, group string, tr *tracker, batch int, member memberFunc) (func(), error) {
	return startClient(env, o, b, group, batch, func(ctx context.Context, msgs []*primitive.MessageExt) error {
		if err := callbackTx(ctx, env.db, msgs, member); err != nil {
			return err
		}
		for _, m := range msgs {
			tr.handled(m.GetProperty("EVENT_ID"))
		}
		return nil
	})
}

// callbackTx is the transaction of one callback: member for each of msgs, then one COMMIT.
func callbackTx(ctx context.Context, db *sqlx.DB, msgs []*primitive.MessageExt, member memberFunc) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, m := range msgs {
		if err := member(ctx, tx, m); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d messages: %w", len(msgs), err)
	}
	return nil
}

// dedupThenBusiness is the hand-written member: it inserts the message's dedup row in dedupTable and, unless
// that row exists already (a duplicate key: already processed, nothing more to do; InnoDB rolls back only
// the failed statement, so the transaction goes on), its business row in bizTable.
func dedupThenBusiness(dedupTable, bizTable, group string) memberFunc {
	return func(ctx context.Context, tx *sqlx.Tx, m *primitive.MessageExt) error {
		id := m.GetProperty("EVENT_ID")
		_, err := tx.ExecContext(ctx, `INSERT INTO `+dedupTable+`
			(consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status)
			VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), 'SUCCESS')`,
			group, id, m.GetProperty("EVENT_TYPE"), m.GetProperty("AGGREGATE_ID"), m.Topic, m.MsgId)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == mysqlDuplicateKey {
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert dedup row of %s: %w", id, err)
		}
		return insertBusinessRow(ctx, tx, bizTable, id)
	}
}
