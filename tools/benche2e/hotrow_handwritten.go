package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
)

// startHotrowHandwrittenBatch is handwritten-hotrow-batch: the hot-row backlog drained by a hand-written batch
// consumer, batchSize messages per callback, each callback one transaction on the application's pool with
// handwritten-multirow's claim (one multi-row INSERT IGNORE, the duplicates read back) and then, per new
// message in account order, the same ledger INSERT and balance upsert as hotrow's handler: what rmqguard's
// hotrow-batch sends, written by hand, for the per-member hot-row target's reference.
func startHotrowHandwrittenBatch(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	if env.hot == nil || env.hot.n != b.n {
		return nil, fmt.Errorf("%s: no hot-row backlog of %d messages", group, b.n)
	}
	dedupTable, ledger, balance := tableName(group, "dedup"), tableName(group, "ledger"), tableName(group, "balance")
	if err := createDedupTable(ctx, env, dedupTable); err != nil {
		return nil, err
	}
	if err := createHotTables(ctx, env, ledger, balance); err != nil {
		return nil, err
	}
	stop, err := startClient(env, o, *env.hot, group, batchSize, func(ctx context.Context, msgs []*primitive.MessageExt) error {
		write, err := hotWriter(msgs, balance)
		if err != nil {
			return err
		}
		if err := multirowTx(ctx, env.db, dedupTable, ledger, group, msgs, write); err != nil {
			return err
		}
		for _, m := range msgs {
			tr.handled(m.GetProperty("EVENT_ID"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stopThenCheckHot(ctx, env, stop, tr, b.n, group, ledger, balance), nil
}

// hotWriter returns the businessWriter of a hot-row callback of msgs: for each new event, in account order
// (message order within an account), a ledger row in the writer's table and an upsert of the account's
// balance in balance.
func hotWriter(msgs []*primitive.MessageExt, balance string) (businessWriter, error) {
	events := make(map[string]hotEvent, len(msgs))
	for _, m := range msgs {
		var ev hotEvent
		if err := json.Unmarshal(m.Body, &ev); err != nil {
			return nil, fmt.Errorf("hot message %s: %w", m.MsgId, err)
		}
		events[m.GetProperty("EVENT_ID")] = ev
	}
	return func(ctx context.Context, ex sqlx.ExecerContext, ledger string, eventIDs []string) error {
		ids := slices.Clone(eventIDs)
		slices.SortStableFunc(ids, func(a, b string) int { return strings.Compare(events[a].Account, events[b].Account) })
		for _, id := range ids {
			ev := events[id]
			if _, err := ex.ExecContext(ctx, `INSERT INTO `+ledger+` (event_id, account, amount, created_at)
				VALUES (?, ?, ?, UTC_TIMESTAMP(6))`, id, ev.Account, ev.Amount); err != nil {
				return fmt.Errorf("ledger row of %s: %w", id, err)
			}
			if _, err := ex.ExecContext(ctx, `INSERT INTO `+balance+` (account, balance) VALUES (?, ?)
				ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)`, ev.Account, ev.Amount); err != nil {
				return fmt.Errorf("balance of %s: %w", ev.Account, err)
			}
		}
		return nil
	}, nil
}
