package dedup_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// hookRecorder is a handler that registers an after-commit hook recording whether the event's dedup row
// was committed when the hook ran (read on another connection), then ends as outcome/err decide.
type hookRecorder struct {
	f         *fixture
	ran       []string // event IDs whose hook ran
	committed []bool   // was the row visible to another connection then
	ranErr    []string // event IDs whose second hook, one that returns an error, ran
}

func (r *hookRecorder) handler(decide dedup.TxHandler) dedup.TxHandler {
	return func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := dedup.AfterCommit(ctx, func(context.Context) {
			var n int
			_ = r.f.db.Get(&n, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, d.Group, d.EventID)
			r.ran = append(r.ran, d.EventID)
			r.committed = append(r.committed, n == 1)
		}); err != nil {
			return consumer.Outcome{}, err
		}
		if err := dedup.AfterCommit(ctx, func(context.Context) error {
			r.ranErr = append(r.ranErr, d.EventID)
			return errors.New("lost")
		}); err != nil {
			return consumer.Outcome{}, err
		}
		return decide(ctx, tx, d)
	}
}

func processed(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
	return consumer.Processed(), nil
}

// F25: the hook runs once, after the commit (the row is visible elsewhere); a duplicate does not run it.
func TestF25_AfterCommitHookRunsOnceAfterCommitNeverForADuplicate(t *testing.T) {
	f := newFixture(t)
	r := &hookRecorder{f: f}
	h := f.chain(t, r.handler(processed))
	ev := f.prefix + "-e"
	f.requireOnceThenDuplicate(t, h, ev, ev)
	assert.Equal(t, []string{ev}, r.ran, "once, not for the duplicate")
	assert.Equal(t, []bool{true}, r.committed, "after the commit")
	assert.Equal(t, []string{ev}, r.ranErr, "a hook that returns an error: once too")
}

// F25: a handler error (retry), a permanent error (dead letter), a stale outcome and a lost claim roll back:
// their hooks never run; the retry that then succeeds runs its own hook once.
func TestF25_AfterCommitHookNeverRunsOnRollbackRetryOrLostClaim(t *testing.T) {
	f := newFixture(t)
	r := &hookRecorder{f: f}
	fail := true
	h := f.chain(t, r.handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.Msg.GetProperty("CASE") {
		case "retry":
			if fail {
				return consumer.Outcome{}, errors.New("business failure")
			}
		case "permanent":
			return consumer.Outcome{}, retry.Permanentf("bad input")
		case "stale":
			return consumer.Stale("older version"), nil
		case "lost": // Confirm fails: MySQL rolled the transaction back under the handler (a ROLLBACK stands in for a deadlock)
			_, err := tx.ExecContext(ctx, "ROLLBACK")
			return consumer.Processed(), err
		}
		return consumer.Processed(), nil
	}))
	for _, c := range []struct{ name, kind string }{
		{"retry", "retry"}, {"permanent", "dead_letter"}, {"stale", "stale"}, {"lost", "retry"},
	} {
		msg := f.orderMsg(t, f.prefix+"-"+c.name, f.prefix+"-"+c.name)
		msg.WithProperty("CASE", c.name)
		o, err := f.handle(h, msg)
		assert.Equal(t, c.kind, o.Kind.String(), c.name)
		if c.name == "lost" {
			assert.ErrorIs(t, err, dedup.ErrClaimLost)
		}
	}
	assert.Empty(t, r.ran, "no hook ran for a rolled-back transaction")
	assert.Empty(t, r.ranErr, "nor a hook that returns an error")

	fail = false
	retried := f.orderMsg(t, f.prefix+"-retry", f.prefix+"-retry")
	retried.WithProperty("CASE", "retry")
	o, err := f.handle(h, retried)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, []string{f.prefix + "-retry"}, r.ran, "the successful retry runs its hook, once")
	assert.Equal(t, []string{f.prefix + "-retry"}, r.ranErr)
}

// F25: a COMMIT that fails (the connection is killed after Confirm) drops the hooks: nothing committed.
func TestF25_AfterCommitHookNeverRunsWhenCommitFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := testenv.NewDelivery(f.group, f.orderMsg(t, f.prefix+"-e", f.prefix+"-1"))
	d.EventID = f.prefix + "-e"
	txn, err := f.store.Protocol().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, f.store.Protocol().Claim(ctx, txn, d))
	ran := false
	require.NoError(t, dedup.AfterCommit(txproto.WithTxn(ctx, txn), func(context.Context) { ran = true }))
	require.NoError(t, f.store.Protocol().Confirm(ctx, txn, d))
	var id int64
	require.NoError(t, txn.SQLTx().Get(&id, `SELECT CONNECTION_ID()`))
	_, err = f.db.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
	require.NoError(t, err)

	require.Error(t, txn.Commit())
	assert.False(t, ran, "the hook of a failed commit never runs")
	assert.Equal(t, 0, f.dedupRows(t, d.EventID), "nothing committed")
	require.ErrorIs(t, dedup.AfterCommit(txproto.WithTxn(ctx, txn), func(context.Context) {}), sql.ErrTxDone, "a finished transaction takes no hooks")
	require.ErrorIs(t, dedup.AfterCommit(ctx, func(context.Context) {}), dedup.ErrNoTx)
	require.ErrorIs(t, dedup.AfterCommit(ctx, func(context.Context) error { return nil }), dedup.ErrNoTx)
}

// F25: a hook that panics is logged with its stack; the message stays committed and acknowledged (not a
// retry), and the hooks after it still run. F36: the panic is counted as a failure.
func TestF25_PanickingAfterCommitHookDoesNotTurnACommitIntoARetry(t *testing.T) {
	f := newFixture(t)
	core, logs := observer.New(zapcore.ErrorLevel)
	var err error
	f.store, err = dedup.NewStore(f.db, dedup.WithLogger(zap.New(core)), dedup.WithObserver(f.metrics))
	require.NoError(t, err)
	second := 0
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := dedup.AfterCommit(ctx, func(context.Context) { panic("publish failed") }); err != nil {
			return consumer.Outcome{}, err
		}
		if err := dedup.AfterCommit(ctx, func(context.Context) { second++ }); err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	})
	ev := f.prefix + "-e"
	o, err := f.handle(h, f.orderMsg(t, ev, ev))
	res := testenv.AnswerTo(t, o, err)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, rmq.ConsumeSuccess, res.Result)
	assert.Equal(t, 1, f.dedupRows(t, ev))
	assert.Equal(t, 1, second, "the next hook ran")
	require.Equal(t, 1, logs.Len())
	entry := logs.All()[0]
	assert.Contains(t, entry.Message, "after-commit hook panicked")
	assert.Contains(t, entry.ContextMap()["stack"], "aftercommit_test.go")
	assert.Equal(t, ev, entry.ContextMap()["event_id"])
	assert.Equal(t, 1.0, f.count(f.metrics.AfterCommitFailures, f.group))
}

// samplingLogger builds a logger writing JSON lines to out whose sampler counts the lines it drops in
// dropped: zap.NewProductionConfig's sampler on every level (per second, level and message text, the first
// 100 lines, then one in 100), or the example consumer's (cmd/example-consumer/logger.go: that sampler on
// debug lines only, teed with an unsampled core for info and above).
func samplingLogger(example bool, out zapcore.WriteSyncer, dropped *atomic.Int64) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	hook := zapcore.SamplerHook(func(_ zapcore.Entry, dec zapcore.SamplingDecision) {
		if dec&zapcore.LogDropped != 0 {
			dropped.Add(1)
		}
	})
	if !example {
		return zap.New(zapcore.NewSamplerWithOptions(zapcore.NewCore(enc, out, zapcore.DebugLevel), time.Second, 100, 100, hook))
	}
	debug := zapcore.NewCore(enc, out, zap.LevelEnablerFunc(func(l zapcore.Level) bool { return l < zapcore.InfoLevel }))
	rest := zapcore.NewCore(enc.Clone(), out, zapcore.InfoLevel)
	return zap.New(zapcore.NewTee(zapcore.NewSamplerWithOptions(debug, time.Second, 100, 100, hook), rest))
}

// jsonLines decodes buf's JSON lines.
func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, raw := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		var line map[string]any
		require.NoError(t, json.Unmarshal(raw, &line))
		lines = append(lines, line)
	}
	return lines
}

// F36: 10 messages whose handlers each register 99 hooks that return an error and one that panics (and two
// that succeed, in both forms): 1,000 failures in about a second, each counted in
// rmqguard_after_commit_failures_total{group} and each logged in its own error line, with its event ID,
// under zap's production sampler, which drops most of a burst of lines sharing their text, and under the
// example consumer's logger. The messages stay processed (F25).
func TestF36_EveryFailingAfterCommitHookIsCountedAndLoggedEvenUnderSampling(t *testing.T) {
	for _, example := range []bool{false, true} {
		name := map[bool]string{false: "production sampler on every level", true: "example consumer's logger"}[example]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var buf bytes.Buffer
			var dropped atomic.Int64
			log := samplingLogger(example, zapcore.Lock(zapcore.AddSync(&buf)), &dropped)
			var err error
			f.store, err = dedup.NewStore(f.db, dedup.WithLogger(log), dedup.WithObserver(f.metrics))
			require.NoError(t, err)
			var _ dedup.Observer = f.metrics
			const messages, failing = 10, 99
			succeeded := 0
			h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				for i := range failing {
					if err := dedup.AfterCommit(ctx, func(context.Context) error {
						return fmt.Errorf("notify %s: endpoint down (%d)", d.EventID, i)
					}); err != nil {
						return consumer.Outcome{}, err
					}
				}
				for _, err := range []error{
					dedup.AfterCommit(ctx, func(context.Context) { panic("notifier panicked") }),
					dedup.AfterCommit(ctx, func(context.Context) error { succeeded++; return nil }),
					dedup.AfterCommit(ctx, func(context.Context) { succeeded++ }),
				} {
					if err != nil {
						return consumer.Outcome{}, err
					}
				}
				return consumer.Processed(), nil
			})
			for i := range messages {
				ev := fmt.Sprintf("%s-e%d", f.prefix, i)
				o, err := f.handle(h, f.orderMsg(t, ev, ev))
				res := testenv.AnswerTo(t, o, err)
				require.NoError(t, err)
				assert.Equal(t, consumer.KindProcessed, o.Kind, "a failed hook does not undo the commit")
				assert.Equal(t, rmq.ConsumeSuccess, res.Result)
			}

			total := messages * (failing + 1)
			assert.Equal(t, float64(total), f.count(f.metrics.AfterCommitFailures, f.group), "every failure counted")
			assert.Equal(t, 2*messages, succeeded, "the hooks after a failure run; a success is not counted")
			failed, panicked := map[string]int{}, map[string]int{}
			for _, line := range jsonLines(t, &buf) {
				assert.Equal(t, "error", line["level"])
				assert.Equal(t, f.group, line["group"])
				ev, _ := line["event_id"].(string)
				switch line["msg"] {
				case "after-commit hook failed; its effect is lost, the transaction stays committed":
					failed[ev]++
					assert.Contains(t, line["error"], ev, "the hook's own error, for its own event")
				case "after-commit hook panicked; its effect is lost, the transaction stays committed":
					panicked[ev]++
					assert.Contains(t, line["stack"], "aftercommit_test.go")
				default:
					t.Errorf("unexpected line %v", line)
				}
			}
			require.Len(t, failed, messages)
			for i := range messages {
				ev := fmt.Sprintf("%s-e%d", f.prefix, i)
				assert.Equal(t, failing, failed[ev], "one line per failed hook of %s", ev)
				assert.Equal(t, 1, panicked[ev], ev)
			}
			if !example {
				assert.Positive(t, dropped.Load(), "the sampler dropped lines in Check: they were written anyway")
			}
		})
	}
}
