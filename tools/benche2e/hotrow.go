package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// The hot-row workload (variants hotrow, hotrow-batch and hotrow-batch-handler): a backlog of its own whose events credit one of
// hotAccounts accounts each (AGGREGATE_ID the account), drained by rmqguard's standard chain around a
// handler that appends a ledger row and adds the amount to the account's balance with an upsert, the row
// lock that concurrent handlers queue on: per message (BatchSize 1) and in batches of batchSize.
const hotAccounts = 50

// hotAccount is the account of hot message i.
func hotAccount(i int) string { return fmt.Sprintf("acct-%02d", i%hotAccounts) }

// hotAmount is the amount hot message i credits.
func hotAmount(i int) int64 { return int64(i%7 + 1) }

// hotEvent is the body of a hot message.
type hotEvent struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// hotMessage is hot message i with event ID id: an AccountCredited event whose aggregate is its account.
func hotMessage(topic, id string, i int) *primitive.Message {
	account := hotAccount(i)
	m := primitive.NewMessage(topic, []byte(`{"eventId":"`+id+`","eventType":"AccountCredited","account":"`+account+
		`","amount":`+strconv.FormatInt(hotAmount(i), 10)+`}`))
	m.WithTag("AccountCredited")
	m.WithKeys([]string{id})
	m.WithProperty("EVENT_ID", id)
	m.WithProperty("EVENT_TYPE", "AccountCredited")
	m.WithProperty("AGGREGATE_ID", account)
	return m
}

// hotBalances returns the balances n hot messages add up to, by account.
func hotBalances(n int) map[string]int64 {
	want := make(map[string]int64, hotAccounts)
	for i := range n {
		want[hotAccount(i)] += hotAmount(i)
	}
	return want
}

// produceHot produces the hot backlog (env.hot) of n messages when a hot-row variant is among variants.
func produceHot(ctx context.Context, env *environment, variants []string, n int) error {
	if !slices.ContainsFunc(variants, func(v string) bool { return strings.Contains(v, variantHotrow) }) {
		return nil
	}
	hot := backlog{topic: "BENCHE2E_HOT_" + strings.ReplaceAll(env.run, "-", "_"), prefix: env.run + "-h-", n: n, message: hotMessage}
	if err := hot.produce(ctx, env); err != nil {
		return err
	}
	env.hot = &hot
	fmt.Fprintf(env.log, "hot-row backlog: %d messages on %s over %d accounts\n", n, hot.topic, hotAccounts)
	return nil
}

// startHotrow returns the drainFunc of a hot-row variant with consumer.Config.BatchSize batch, each event's
// ledger row and balance upsert written by a per-message handler (dedup.HandleJSON): see startHot.
func startHotrow(batch int) drainFunc {
	return startHot(batch, func(ledger, balance string) consumer.Handler {
		return dedup.HandleJSON(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, ev hotEvent) (consumer.Outcome, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+ledger+` (event_id, account, amount, created_at)
				VALUES (?, ?, ?, UTC_TIMESTAMP(6))`, d.EventID, ev.Account, ev.Amount); err != nil {
				return consumer.Outcome{}, fmt.Errorf("ledger row of %s: %w", d.EventID, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+balance+` (account, balance) VALUES (?, ?)
				ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)`, ev.Account, ev.Amount); err != nil {
				return consumer.Outcome{}, fmt.Errorf("balance of %s: %w", ev.Account, err)
			}
			return consumer.Processed(), nil
		})
	})
}

// startHotrowBatchHandler is hotrow-batch-handler: BatchSize batchSize around a batch handler
// (dedup.HandleBatchJSON) that writes a batch's ledger rows in one multi-row INSERT and its balances in one
// multi-row upsert, one row per account (the batch's amounts summed) in account order.
func startHotrowBatchHandler() drainFunc {
	return startHot(batchSize, func(ledger, balance string) consumer.Handler {
		return dedup.HandleBatchJSON(func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery, evs []hotEvent) ([]consumer.Outcome, error) {
			rows := make([]string, len(ds))
			args := make([]any, 0, 3*len(ds))
			sums := make(map[string]int64, hotAccounts)
			for i, d := range ds {
				rows[i] = `(?, ?, ?, UTC_TIMESTAMP(6))`
				args = append(args, d.EventID, evs[i].Account, evs[i].Amount)
				sums[evs[i].Account] += evs[i].Amount
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+ledger+` (event_id, account, amount, created_at) VALUES `+
				strings.Join(rows, ", "), args...); err != nil {
				return nil, fmt.Errorf("ledger rows of %d events: %w", len(ds), err)
			}
			accounts := slices.Sorted(maps.Keys(sums))
			rows, args = rows[:0], args[:0]
			for _, a := range accounts {
				rows = append(rows, `(?, ?)`)
				args = append(args, a, sums[a])
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+balance+` (account, balance) VALUES `+strings.Join(rows, ", ")+
				` ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)`, args...); err != nil {
				return nil, fmt.Errorf("balances of %d accounts: %w", len(accounts), err)
			}
			outs := make([]consumer.Outcome, len(ds))
			for i := range outs {
				outs[i] = consumer.Processed()
			}
			return outs, nil
		})
	})
}

// startHot returns the drainFunc of a hot-row variant with consumer.Config.BatchSize batch around the handler
// mk builds on the variant's ledger and balance tables: it drains env.hot (not b, whose size it has) into
// those tables of the group's, and after the drain reports on env.log when the ledger or the balances do not
// add up (an effect lost or applied twice).
func startHot(batch int, mk func(ledger, balance string) consumer.Handler) drainFunc {
	return func(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
		if env.hot == nil || env.hot.n != b.n {
			return nil, fmt.Errorf("%s: no hot-row backlog of %d messages", group, b.n)
		}
		ledger, balance := tableName(group, "ledger"), tableName(group, "balance")
		if err := createHotTables(ctx, env, ledger, balance); err != nil {
			return nil, err
		}
		env.cleanup.scope(group)
		stop, err := startChain(env, o, *env.hot, group, tr, batch, nil, mk(ledger, balance))
		if err != nil {
			return nil, err
		}
		return stopThenCheckHot(ctx, env, stop, tr, b.n, group, ledger, balance), nil
	}
}

// stopThenCheckHot returns the stop function of a hot-row drain of n messages: stop, then, when the drain
// finished, checkHot on the group's ledger and balance, reported on env.log when they do not add up.
func stopThenCheckHot(ctx context.Context, env *environment, stop func(), tr *tracker, n int, group, ledger, balance string) func() {
	return func() {
		stop()
		if tr.result() != n {
			return // an unfinished drain: its error says so
		}
		if err := checkHot(ctx, env.db, ledger, balance, n); err != nil {
			fmt.Fprintf(env.log, "  %s: %v\n", group, err)
		}
	}
}

// createHotTables creates a hot-row variant's ledger and balance tables and records them for cleanup.
func createHotTables(ctx context.Context, env *environment, ledger, balance string) error {
	if _, err := env.db.ExecContext(ctx, `CREATE TABLE `+ledger+` (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		event_id VARCHAR(128) NOT NULL,
		account VARCHAR(64) NOT NULL,
		amount BIGINT NOT NULL,
		created_at DATETIME(6) NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`); err != nil {
		return fmt.Errorf("create ledger table %s: %w", ledger, err)
	}
	env.cleanup.table(ledger)
	if _, err := env.db.ExecContext(ctx, `CREATE TABLE `+balance+` (
		account VARCHAR(64) NOT NULL PRIMARY KEY,
		balance BIGINT NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`); err != nil {
		return fmt.Errorf("create balance table %s: %w", balance, err)
	}
	env.cleanup.table(balance)
	return nil
}

// checkHot returns an error unless the ledger holds one row for each of the n events and the balances are
// what the n events add up to (hotBalances).
func checkHot(ctx context.Context, db *sqlx.DB, ledger, balance string, n int) error {
	var rows, events int
	if err := db.QueryRowxContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT event_id) FROM `+ledger).Scan(&rows, &events); err != nil {
		return fmt.Errorf("hot-row check: read the ledger: %w", err)
	}
	var bs []struct {
		Account string `db:"account"`
		Balance int64  `db:"balance"`
	}
	if err := db.SelectContext(ctx, &bs, `SELECT account, balance FROM `+balance); err != nil {
		return fmt.Errorf("hot-row check: read the balances: %w", err)
	}
	got := make(map[string]int64, len(bs))
	for _, b := range bs {
		got[b.Account] = b.Balance
	}
	if rows != n || events != n || !maps.Equal(got, hotBalances(n)) {
		return fmt.Errorf("hot-row check FAILED: %d ledger rows of %d events for %d messages; balances reconcile: %t",
			rows, events, n, maps.Equal(got, hotBalances(n)))
	}
	return nil
}
