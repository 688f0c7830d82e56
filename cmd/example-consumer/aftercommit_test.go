package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/metrics"
)

// F36: the example consumer's store, wired as run wires it (its logger, its metrics), logs and counts each
// of 1,000 after-commit hooks that fail after one commit: 1,000 error lines with the event ID, none
// sampled away, and rmqguard_after_commit_failures_total{group} = 1,000. The transaction stays committed.
func TestExampleConsumer_F36_EveryFailedAfterCommitHookIsLoggedAndCounted(t *testing.T) {
	db := shoptest.MySQL(t)
	var buf bytes.Buffer
	log := newLogger(zapcore.DebugLevel, zapcore.Lock(zapcore.AddSync(&buf)))
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()), dedup.WithLogger(log), dedup.WithObserver(m))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	group, ev := testenv.Unique("example-ac"), testenv.Unique("ev")
	d := testenv.NewDelivery(group, &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER"}})
	d.EventID = ev
	ctx := context.Background()
	txn, err := store.Protocol().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Protocol().Claim(ctx, txn, d))
	const failures = 1000
	for range failures {
		require.NoError(t, dedup.AfterCommit(txproto.WithTxn(ctx, txn), func(context.Context) error {
			return errors.New("notifier: connection refused")
		}))
	}
	require.NoError(t, txn.Commit(), "failed hooks do not fail the commit")

	lines := 0
	for _, raw := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var line map[string]any
		require.NoError(t, json.Unmarshal(raw, &line))
		if line["msg"] == "after-commit hook failed; its effect is lost, the transaction stays committed" &&
			line["level"] == "error" && line["event_id"] == ev && line["group"] == group {
			lines++
		}
	}
	assert.Equal(t, failures, lines, "one error line per failure")
	assert.Equal(t, float64(failures), testutil.ToFloat64(m.AfterCommitFailures.WithLabelValues(group)))
	var n int
	require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, group, ev))
	assert.Equal(t, 1, n, "committed")
	_, err = db.Exec(`DELETE FROM processed_event WHERE consumer_group = ?`, group)
	require.NoError(t, err)
}
