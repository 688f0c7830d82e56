package redisfast_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F16: TTL 1 s, a handler that takes 3 s, a duplicate at 2 s. No key exists while the first delivery runs
// (done is written only after the commit, and no in-progress marker exists that could acknowledge the
// duplicate); the duplicate goes to MySQL, waits on the row's lock and is a duplicate once the first
// commits: one effect. After the commit the key is there, with the 1 s TTL, and once it expired MySQL
// decides again.
func TestF16_TTL1sHandler3sDuplicateAt2sMySQLDecides(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Second)
	slow := func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		select {
		case <-time.After(3 * time.Second):
			return consumer.Processed(), nil
		case <-ctx.Done():
			return consumer.Outcome{}, ctx.Err()
		}
	}
	h := f.chain(t, slow)
	ev := f.prefix + "-e"

	type result struct {
		o   consumer.Outcome
		err error
	}
	first := make(chan result, 1)
	go func() {
		o, err := f.handle(h, f.msg(ev))
		first <- result{o, err}
	}()
	time.Sleep(2 * time.Second)
	assert.Empty(t, f.keysOfTest(t), "at 2 s nothing is in Redis: no done key before the commit, no marker")

	dup, err := f.handle(h, f.msg(ev)) // waits on the first's row lock until it commits at ~3 s
	require.NoError(t, err)
	r := <-first
	require.NoError(t, r.err)
	assert.Equal(t, consumer.KindProcessed, r.o.Kind)
	assert.Equal(t, consumer.KindDuplicate, dup.Kind, "MySQL decided")
	assert.Equal(t, 2, f.obs.get("miss"), "both deliveries fell through")
	ttl, err := f.rdb.PTTL(context.Background(), f.key(ev)).Result()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= time.Second, "done key written after the commit with the 1 s TTL, got %v", ttl)

	f.waitExpired(t, f.key(ev))
	again, err := f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, again.Kind, "expired key: MySQL decided")
	assert.Equal(t, 3, f.obs.get("miss"))
	assert.Equal(t, 1, f.ledger.Count(t, ev), "one effect")
}

// F16 with several claims in one transaction (batch mode: one transaction per batch, a SAVEPOINT per
// member): the second member repeats the first one's event, so its claim hits the first member's row,
// which is not committed. That 1062 is dedup.ErrDuplicate, but it does not come from a committed row: when
// the batch then rolls back, Redis must not answer "done" for the event, or its redelivery is acknowledged
// as a duplicate and the event is lost.
func TestRedisFast_DuplicateOfAnUncommittedClaimInTheSameTransactionWritesNoDoneKey(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Minute)
	ctx := context.Background()
	ev := f.prefix + "-e"
	first, second := testenv.NewDelivery(f.group, f.msg(ev)), testenv.NewDelivery(f.group, f.msg(ev))
	first.EventID, second.EventID = ev, ev

	txn, err := f.layer.Protocol().Begin(ctx)
	require.NoError(t, err)
	_, err = txn.SQLTx().ExecContext(ctx, "SAVEPOINT m1")
	require.NoError(t, err)
	require.NoError(t, f.layer.Protocol().Claim(ctx, txn, first))
	_, err = txn.SQLTx().ExecContext(ctx, "SAVEPOINT m2")
	require.NoError(t, err)
	require.ErrorIs(t, f.layer.Protocol().Claim(ctx, txn, second), dedup.ErrDuplicate, "the batch's own uncommitted row")
	require.NoError(t, txn.Rollback(), "the batch fails as a whole")

	processed, err := f.store.Processed(ctx, f.group, ev)
	require.NoError(t, err)
	require.False(t, processed, "nothing committed")
	again := testenv.NewDelivery(f.group, f.msg(ev))
	again.EventID = ev
	_, done := f.layer.Protocol().Done(ctx, again)
	assert.False(t, done, "Redis answers done for an event whose row never committed: its redelivery would be lost")
}
