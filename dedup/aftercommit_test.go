package dedup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

// hookRecorder is a handler that registers an after-commit hook recording whether the event's dedup row
// was committed when the hook ran (read on another connection), then ends as outcome/err decide.
type hookRecorder struct {
	f         *fixture
	ran       []string // event IDs whose hook ran
	committed []bool   // was the row visible to another connection then
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
		o, _, err := f.handle(h, msg)
		assert.Equal(t, c.kind, o.Kind.String(), c.name)
		if c.name == "lost" {
			assert.ErrorIs(t, err, dedup.ErrClaimLost)
		}
	}
	assert.Empty(t, r.ran, "no hook ran for a rolled-back transaction")

	fail = false
	retried := f.orderMsg(t, f.prefix+"-retry", f.prefix+"-retry")
	retried.WithProperty("CASE", "retry")
	o, _, err := f.handle(h, retried)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, []string{f.prefix + "-retry"}, r.ran, "the successful retry runs its hook, once")
}

// F25: a COMMIT that fails (the connection is killed after Confirm) drops the hooks: nothing committed.
func TestF25_AfterCommitHookNeverRunsWhenCommitFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := consumer.NewDelivery(f.group, f.orderMsg(t, f.prefix+"-e", f.prefix+"-1"))
	d.EventID = f.prefix + "-e"
	txn, err := f.store.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, f.store.Claim(ctx, txn, d))
	ran := false
	require.NoError(t, dedup.AfterCommit(dedup.WithTxn(ctx, txn), func(context.Context) { ran = true }))
	require.NoError(t, f.store.Confirm(ctx, txn, d))
	var id int64
	require.NoError(t, txn.Tx.Get(&id, `SELECT CONNECTION_ID()`))
	_, err = f.db.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
	require.NoError(t, err)

	require.Error(t, txn.Commit())
	assert.False(t, ran, "the hook of a failed commit never runs")
	assert.Equal(t, 0, f.dedupRows(t, d.EventID), "nothing committed")
	require.ErrorIs(t, txn.AfterCommit(func(context.Context) {}), sql.ErrTxDone, "a finished transaction takes no hooks")
	require.ErrorIs(t, dedup.AfterCommit(ctx, func(context.Context) {}), dedup.ErrNoTx)
}

// F25: a hook that panics is logged with its stack; the message stays committed and acknowledged (not a
// retry), and the hooks after it still run.
func TestF25_PanickingAfterCommitHookDoesNotTurnACommitIntoARetry(t *testing.T) {
	f := newFixture(t)
	core, logs := observer.New(zapcore.ErrorLevel)
	var err error
	f.store, err = dedup.NewStore(f.db, dedup.WithLogger(zap.New(core)))
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
	o, res, err := f.handle(h, f.orderMsg(t, ev, ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, rmq.ConsumeSuccess, res.Result)
	assert.Equal(t, 1, f.dedupRows(t, ev))
	assert.Equal(t, 1, second, "the next hook ran")
	require.Equal(t, 1, logs.Len())
	entry := logs.All()[0]
	assert.Contains(t, entry.Message, "after-commit hook panicked")
	assert.Contains(t, entry.ContextMap()["stack"], "aftercommit_test.go")
}
