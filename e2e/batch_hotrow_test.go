package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// msgLostBatch is the consumer's line for a batch whose shared transaction was lost (handled once more).
const msgLostBatch = "the batch's shared transaction was lost; handling the batch once more in a new one"

// retriedOnly counts the decisions of a consumer that are not final acknowledgements (a retry, or a
// member of a retried batch).
type retriedOnly struct {
	testenv.Decisions
	mu      sync.Mutex
	retried int
}

func (r *retriedOnly) Decided(_ *consumer.Delivery, dec consumer.Decision) {
	if !dec.Outcome.Kind.Acknowledges() || dec.BatchRetried {
		r.mu.Lock()
		r.retried++
		r.mu.Unlock()
	}
}

// F37: two consumers of one group, BatchSize 32, 1,000 messages queued on 8 queues before they start, a
// handler that appends a ledger row and adds the event's amount to one of 50 account balances (its
// AGGREGATE_ID): every event takes effect once, the balances reconcile, nothing is dead-lettered, and at
// most one batch per 1,000 messages loses its shared transaction (the consumer's "handling the batch once
// more" line; before the first pass the same workload lost 8 batches per 1,110 messages to deadlocks).
func TestE2E_F37_HotRowsInBatchesLoseAtMostOneBatchPerThousand(t *testing.T) {
	w := newWorld(t, 8)
	db := shoptest.MySQL(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	ledger := testenv.NewLedger(t, db, w.run)
	balances := testenv.NewBalances(t, db, w.run)

	const messages, accounts = 1000, 50
	want := map[string]int64{}
	msgs := make([]*primitive.Message, messages)
	for i := range msgs {
		account, amount := fmt.Sprintf("acct-%02d", i%accounts), int64(i%7+1)
		want[account] += amount
		msgs[i] = primitive.NewMessage(w.topic, []byte(`{}`))
		msgs[i].WithProperty("EVENT_ID", fmt.Sprintf("%s-%d", w.run, i))
		msgs[i].WithProperty("AGGREGATE_ID", account)
		msgs[i].WithProperty("AMOUNT", strconv.FormatInt(amount, 10))
	}
	w.send(msgs...)

	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	handler := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		amount, err := strconv.ParseInt(d.Msg.GetProperty("AMOUNT"), 10, 64)
		if err != nil {
			return consumer.Outcome{}, err
		}
		if err := ledger.Append(ctx, tx, d.EventID); err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), balances.Add(ctx, tx, d.AggregateID, amount)
	}), middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(store))))
	core, logs := observer.New(zapcore.InfoLevel)
	obs := &retriedOnly{}
	cfg := consumer.Config{BatchSize: 32, MaxAttempts: 5}
	cs := []*consumer.Consumer{
		w.start(cfg, handler, consumer.WithLogger(zap.New(core)), consumer.WithObserver(obs)),
		w.start(cfg, handler, consumer.WithLogger(zap.New(core)), consumer.WithObserver(obs)),
	}
	require.Eventually(t, func() bool {
		events, _ := ledger.Totals(t)
		return events == messages
	}, 120*time.Second, 200*time.Millisecond, "all %d events take effect", messages)
	time.Sleep(3 * time.Second) // a second apply would arrive within this (delay levels are 1 s)
	for _, c := range cs {
		require.NoError(t, c.Shutdown(w.ctx))
	}

	ledger.RequireOncePerEvent(t, messages)
	assert.Equal(t, want, balances.All(t), "the balances reconcile")
	lost := logs.FilterMessage(msgLostBatch).Len()
	obs.mu.Lock()
	retried := obs.retried
	obs.mu.Unlock()
	t.Logf("F37: %d messages, %d lost batches, %d retry decisions", messages, lost, retried)
	assert.LessOrEqual(t, lost, messages/1000, "lost batches")
	w.requireNoDeadLetters()
}
