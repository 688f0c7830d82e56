package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// startHandwrittenMultirow is the hand-written ceiling of a batch consumer with dedup: per callback (up to
// batchSize messages) one transaction on the application's pool with one multi-row INSERT IGNORE of the
// messages' dedup rows (in event ID order, each carrying the callback's claim token), one SELECT of the
// rows carrying that token when some rows were there already (the duplicates), one multi-row INSERT of the
// new messages' business rows, and COMMIT. A failure fails and redelivers the whole callback.
func startHandwrittenMultirow(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	return startMultirowClaim(ctx, env, o, b, group, tr, insertBusinessRows)
}

// startHandwrittenClaimBatch is handwritten-multirow with one business INSERT per new message: the statements
// rmqguard-batch sends on its happy path (one multi-row claim, the per-message handler's writes, COMMIT),
// written by hand.
func startHandwrittenClaimBatch(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	return startMultirowClaim(ctx, env, o, b, group, tr, insertBusinessRowsOneByOne)
}

// insertBusinessRowsOneByOne is a businessWriter with one INSERT per event, as a per-message handler sends.
func insertBusinessRowsOneByOne(ctx context.Context, ex sqlx.ExecerContext, table string, eventIDs []string) error {
	for _, id := range eventIDs {
		if err := insertBusinessRow(ctx, ex, table, id); err != nil {
			return err
		}
	}
	return nil
}

// businessWriter writes the business rows of eventIDs (at least one) into table through ex.
type businessWriter func(ctx context.Context, ex sqlx.ExecerContext, table string, eventIDs []string) error

// startMultirowClaim drains b with one multirowTx per callback, writing the new messages' business rows with write.
func startMultirowClaim(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker, write businessWriter) (func(), error) {
	dedupTable, bizTable := tableName(group, "dedup"), tableName(group, "orders")
	if err := createDedupTable(ctx, env, dedupTable); err != nil {
		return nil, err
	}
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	return startClient(env, o, b, group, batchSize, func(ctx context.Context, msgs []*primitive.MessageExt) error {
		if err := multirowTx(ctx, env.db, dedupTable, bizTable, group, msgs, write); err != nil {
			return err
		}
		for _, m := range msgs {
			tr.handled(m.GetProperty("EVENT_ID"))
		}
		return nil
	})
}

// multirowTx is the transaction of one callback of handwritten-multirow (see startHandwrittenMultirow), the
// business rows written by write.
func multirowTx(ctx context.Context, db *sqlx.DB, dedupTable, bizTable, group string, msgs []*primitive.MessageExt, write businessWriter) error {
	token, err := claimToken()
	if err != nil {
		return err
	}
	claim, args, ids := multirowClaim(dedupTable, group, token, msgs)
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, claim, args...)
	if err != nil {
		return fmt.Errorf("claim %d events: %w", len(ids), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("claim %d events: rows affected: %w", len(ids), err)
	}
	fresh := ids
	switch {
	case n == 0: // all duplicates
		fresh = nil
	case int(n) < len(ids):
		q, qargs := ownedQuery(dedupTable, group, token, ids)
		if err := tx.SelectContext(ctx, &fresh, q, qargs...); err != nil {
			return fmt.Errorf("read back the claims of %d events: %w", len(ids), err)
		}
	}
	if len(fresh) > 0 {
		if err := write(ctx, tx, bizTable, fresh); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d messages: %w", len(msgs), err)
	}
	return nil
}

// claimToken returns a new random claim token: 32 hex digits, as processed_event.claim_token holds.
func claimToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// multirowClaim returns handwritten-multirow's claim of msgs in dedupTable (processed_event's shape) for
// group: one INSERT IGNORE with a row per distinct event ID (a later message of the same event is left
// out: it is a duplicate) in event ID order, so that concurrent callbacks lock their rows in one order,
// each carrying token; its arguments; and the event IDs in that order.
func multirowClaim(dedupTable, group, token string, msgs []*primitive.MessageExt) (query string, args []any, ids []string) {
	byID := make(map[string]*primitive.MessageExt, len(msgs))
	for _, m := range msgs {
		id := m.GetProperty("EVENT_ID")
		if _, ok := byID[id]; !ok {
			byID[id] = m
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var q strings.Builder
	q.WriteString(`INSERT IGNORE INTO ` + dedupTable +
		` (consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status, claim_token) VALUES `)
	args = make([]any, 0, 7*len(ids))
	for i, id := range ids {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(`(?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), 'SUCCESS', ?)`)
		m := byID[id]
		args = append(args, group, id, m.GetProperty("EVENT_TYPE"), m.GetProperty("AGGREGATE_ID"), m.Topic, m.MsgId, token)
	}
	return q.String(), args, ids
}

// ownedQuery returns the SELECT of the event IDs among ids whose dedup row in dedupTable carries token (the
// rows a multirowClaim with token inserted), and its arguments.
func ownedQuery(dedupTable, group, token string, ids []string) (string, []any) {
	args := make([]any, 0, 2+len(ids))
	args = append(args, token, group)
	for _, id := range ids {
		args = append(args, id)
	}
	return `SELECT event_id FROM ` + dedupTable + ` WHERE claim_token = ? AND consumer_group = ? AND event_id IN (?` +
		strings.Repeat(", ?", len(ids)-1) + `) ORDER BY event_id`, args
}

// insertBusinessRows inserts the business rows of eventIDs (at least one) through ex in one statement.
func insertBusinessRows(ctx context.Context, ex sqlx.ExecerContext, table string, eventIDs []string) error {
	q, args := businessRows(table, eventIDs)
	if _, err := ex.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("insert the business rows of %d events: %w", len(eventIDs), err)
	}
	return nil
}

// businessRows returns the multi-row INSERT of eventIDs' business rows into table and its arguments.
func businessRows(table string, eventIDs []string) (string, []any) {
	var q strings.Builder
	q.WriteString(`INSERT INTO ` + table + businessColumns)
	args := make([]any, 0, 4*len(eventIDs))
	for i, id := range eventIDs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(businessRow)
		args = businessArgs(args, id)
	}
	return q.String(), args
}

// startBatchHandler is rmqguard-batch-handler: BatchSize batchSize and the standard chain, around a batch handler
// (dedup.HandleBatch) that inserts the business rows of the batch's new messages in one multi-row INSERT.
func startBatchHandler(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	bizTable := tableName(group, "orders")
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	env.cleanup.scope(group)
	return startChain(env, o, b, group, tr, batchSize, nil, dedup.HandleBatch(
		func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery) ([]consumer.Outcome, error) {
			ids := make([]string, len(ds))
			for i, d := range ds {
				ids[i] = d.EventID
			}
			if err := insertBusinessRows(ctx, tx, bizTable, ids); err != nil {
				return nil, err
			}
			outs := make([]consumer.Outcome, len(ds))
			for i := range outs {
				outs[i] = consumer.Processed()
			}
			return outs, nil
		}))
}
