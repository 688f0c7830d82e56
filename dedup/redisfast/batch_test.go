package redisfast_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// batchCallback is the fixture's chain behind a consumer with BatchSize 32 (one shared transaction per
// callback).
func (f *fixture) batchCallback(t *testing.T, h func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error)) *testenv.Callback {
	t.Helper()
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, HandlerTimeout: 5 * time.Second}
	return testenv.NewCallback(t, cfg, f.chain(t, h))
}

func (f *fixture) exists(t *testing.T, eventID string) bool {
	t.Helper()
	n, err := f.rdb.Exists(context.Background(), f.key(eventID)).Result()
	require.NoError(t, err)
	return n == 1
}

// S8 in batch mode (rule 9): the layer's done keys of the kept members are written by their after-commit
// hooks once the batch COMMIT succeeded, never before it; a member rolled back to its savepoint gets none; a
// stale member gets one; the next batch of the same events is answered from Redis without the database.
func TestRedisFast_BatchDoneKeysWrittenAfterTheBatchCommit(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Minute)
	e1, e2, e3, e4 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3", f.prefix+"-4"
	keyBeforeCommit := true
	cb := f.batchCallback(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.EventID {
		case e2:
			return consumer.Outcome{}, errors.New("member 2 fails")
		case e3:
			keyBeforeCommit = f.exists(t, e1)
		case e4:
			return consumer.Stale("older version"), nil
		}
		return consumer.Processed(), nil
	})
	msgs := []*primitive.MessageExt{f.msg(e1), f.msg(e2), f.msg(e3), f.msg(e4)}
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.False(t, keyBeforeCommit, "no done key before the batch COMMIT")
	assert.True(t, f.exists(t, e1))
	assert.False(t, f.exists(t, e2), "the member rolled back to its savepoint has no done key")
	assert.True(t, f.exists(t, e3))
	assert.True(t, f.exists(t, e4), "the stale member's row committed with the batch")

	again := []*primitive.MessageExt{f.msg(e1), f.msg(e3), f.msg(e4)}
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, again...))
	for _, m := range again {
		assert.Equal(t, consumer.KindDuplicate, cb.Decisions(m.MsgId)[0].Outcome.Kind)
	}
	assert.Equal(t, 1, f.ledger.Count(t, e1))
	assert.Equal(t, 1, f.ledger.Count(t, e3))
}

// F16 in batch mode: when the batch transaction does not commit (here a member's handler ends it with a
// ROLLBACK of its own, so the kept rows are gone at the count before COMMIT), no done key is written, not
// even for a member that repeats an event claimed earlier in the same batch (its 1062 would come from the
// batch's own uncommitted row). Lost twice, the members are handled alone: only then does member 1 commit
// and get its key; member 2, whose own transaction its ROLLBACK ends, gets none.
func TestF16_Batch_LostBatchWritesNoDoneKey(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Minute)
	e1, e2 := f.prefix+"-1", f.prefix+"-2"
	var keysBeforeAlone []bool
	cb := f.batchCallback(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if batch.FromContext[consumer.Outcome, string](ctx) == nil && keysBeforeAlone == nil {
			keysBeforeAlone = []bool{f.exists(t, e1), f.exists(t, e2)}
		}
		if d.EventID == e2 {
			if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
				return consumer.Outcome{}, err
			}
		}
		return consumer.Processed(), nil
	})
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, f.msg(e1), f.msg(e1), f.msg(e2)))
	assert.Equal(t, []bool{false, false}, keysBeforeAlone, "no done key after the two lost batch passes")
	assert.True(t, f.exists(t, e1), "member 1 committed alone")
	assert.Equal(t, 1, f.ledger.Count(t, e1))
	assert.False(t, f.exists(t, e2), "member 2's own transaction did not commit")
	assert.Equal(t, 0, f.ledger.Count(t, e2))
}
