package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/outbox"
)

// settlePoll is how often a drain whose messages were all handled looks whether the outbox rows are sent.
const settlePoll = 20 * time.Millisecond

// latencies are the commit-to-SEND_OK times of one drain's outbox rows: created_at (written in the
// handler's transaction, just before its COMMIT) to sent_at (written by the relay right after SEND_OK),
// both on the database's clock.
type latencies struct {
	rows     int
	p50, p99 time.Duration
}

// settleFunc waits, once every message of the backlog was handled, for the rest of a variant's work and
// returns when that work ended (on this process's clock) and its latencies.
type settleFunc func(ctx context.Context, stall time.Duration) (end time.Time, lat latencies, err error)

// startRmqguardOutbox is the rmqguard variant whose handler also records one outbox message per event
// (outbox.Send, to the run's outbox topic), with the relay (outbox.Run) running in this process. Its dedup
// and outbox tables have a prefix of the group's own, so that no other relay sees its rows. The drain ends
// when every message was handled and every outbox row sent (tr.settle).
func startRmqguardOutbox(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	bizTable := tableName(group, "orders")
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	prefix := outboxPrefix(env.run, group)
	obTable := prefix + outboxsql.Table
	env.cleanup.prefix(prefix)
	if _, err := dedup.Migrate(ctx, env.db.DB, dedup.WithTablePrefix(prefix)); err != nil {
		return nil, err
	}
	if _, err := outbox.Migrate(ctx, env.db.DB, prefix); err != nil {
		return nil, err
	}
	tr.settle = func(ctx context.Context, stall time.Duration) (time.Time, latencies, error) {
		return settleOutbox(ctx, env.db, obTable, b.n, stall)
	}
	return startChainOn(env, o, b, group, tr, 1, nil, []dedup.Option{dedup.WithTablePrefix(prefix)},
		func(store *dedup.Store) (dedup.TxHandler, func(), error) {
			ob, err := outbox.New(store, outbox.Config{NameServers: env.nameServers})
			if err != nil {
				return nil, nil, err
			}
			rctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ob.Run(rctx) }()
			stopRelay := func() {
				cancel()
				if err := <-done; err != nil {
					fmt.Fprintf(env.log, "%s: relay: %v\n", group, err)
				}
			}
			h := func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				if err := insertBusinessRow(ctx, tx, bizTable, d.EventID); err != nil {
					return consumer.Outcome{}, err
				}
				if _, err := ob.Send(ctx, d, outbox.Message{Name: "noted", Topic: env.outboxTopic, Tag: "OrderNoted",
					Body: []byte(`{"eventType":"OrderNoted","orderNo":"O-` + d.EventID + `"}`)}); err != nil {
					return consumer.Outcome{}, err
				}
				return consumer.Processed(), nil
			}
			return h, stopRelay, nil
		})
}

// outboxPrefix is the table prefix of the outbox variant's group in run: the run's table name, "_ob" and a
// hash of the group (the group itself is too long for a table prefix).
func outboxPrefix(run, group string) string {
	sum := sha256.Sum256([]byte(group))
	return tableName(run) + "_ob" + hex.EncodeToString(sum[:3]) + "_"
}

// settleOutbox waits until no row of the outbox table is pending (giving up after stall without progress),
// checks that all n rows were sent (none parked), and returns when the last was sent and the latencies.
func settleOutbox(ctx context.Context, db *sqlx.DB, table string, n int, stall time.Duration) (time.Time, latencies, error) {
	last, lastChange := -1, time.Now()
	for {
		var pending int
		if err := db.GetContext(ctx, &pending, `SELECT COUNT(*) FROM `+table+` WHERE status = 'pending'`); err != nil {
			return time.Time{}, latencies{}, fmt.Errorf("outbox rows pending: %w", err)
		}
		if pending == 0 {
			break
		}
		if now := time.Now(); pending != last {
			last, lastChange = pending, now
		} else if now.Sub(lastChange) > stall {
			return time.Time{}, latencies{}, fmt.Errorf("outbox: %d rows still pending after %s: %w", pending, stall, errStalled)
		}
		if err := sleepCtx(ctx, settlePoll); err != nil {
			return time.Time{}, latencies{}, err
		}
	}
	var lat []int64
	if err := db.SelectContext(ctx, &lat, `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, sent_at) FROM `+table+
		` WHERE status = 'sent'`); err != nil {
		return time.Time{}, latencies{}, fmt.Errorf("outbox latencies: %w", err)
	}
	if len(lat) != n {
		return time.Time{}, latencies{}, fmt.Errorf("outbox: %d rows sent, want %d (one per message; the others are parked)", len(lat), n)
	}
	// When the last row was sent, on this process's clock: how long ago the database says it was.
	var ago int64
	before := time.Now()
	if err := db.GetContext(ctx, &ago, `SELECT TIMESTAMPDIFF(MICROSECOND, MAX(sent_at), UTC_TIMESTAMP(6)) FROM `+table+
		` WHERE status = 'sent'`); err != nil {
		return time.Time{}, latencies{}, fmt.Errorf("outbox last send: %w", err)
	}
	after := time.Now()
	end := before.Add(after.Sub(before) / 2).Add(-time.Duration(ago) * time.Microsecond)
	slices.Sort(lat)
	return end, latencies{rows: len(lat), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99)}, nil
}

// percentile returns the nearest-rank p-quantile (0 < p ≤ 1) of sorted microseconds; 0 for none.
func percentile(sortedMicros []int64, p float64) time.Duration {
	if len(sortedMicros) == 0 {
		return 0
	}
	i := max(int(math.Ceil(p*float64(len(sortedMicros))))-1, 0)
	return time.Duration(sortedMicros[i]) * time.Microsecond
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
