package redisfast_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F16 with several claims in one transaction (batch mode: one transaction per batch, a SAVEPOINT per
// member): the second member repeats the first one's event, so its claim hits the first member's row,
// which is not committed. That 1062 is dedup.ErrDuplicate, but it does not come from a committed row: when
// the batch then rolls back, Redis must not answer "done" for the event, or its redelivery is acknowledged
// as a duplicate and the event is lost.
func TestRedisFast_DuplicateOfAnUncommittedClaimInTheSameTransactionWritesNoDoneKey(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Minute)
	ctx := context.Background()
	ev := f.prefix + "-e"
	first, second := consumer.NewDelivery(f.group, f.msg(ev)), consumer.NewDelivery(f.group, f.msg(ev))
	first.EventID, second.EventID = ev, ev

	txn, err := f.layer.Begin(ctx)
	require.NoError(t, err)
	_, err = txn.Tx.ExecContext(ctx, "SAVEPOINT m1")
	require.NoError(t, err)
	require.NoError(t, f.layer.Claim(ctx, txn, first))
	_, err = txn.Tx.ExecContext(ctx, "SAVEPOINT m2")
	require.NoError(t, err)
	require.ErrorIs(t, f.layer.Claim(ctx, txn, second), dedup.ErrDuplicate, "the batch's own uncommitted row")
	require.NoError(t, txn.Rollback(), "the batch fails as a whole")

	processed, err := f.store.Processed(ctx, f.group, ev)
	require.NoError(t, err)
	require.False(t, processed, "nothing committed")
	again := consumer.NewDelivery(f.group, f.msg(ev))
	again.EventID = ev
	_, done := f.layer.Done(ctx, again)
	assert.False(t, done, "Redis answers done for an event whose row never committed: its redelivery would be lost")
}

// BenchmarkRedisFast_NewMessageRedisBlackholed measures what a Redis that accepts connections but never
// answers (CLIENT PAUSE ALL on a server of the benchmark's own) costs each new message through Dedup:
// "mysql" is the database store alone, "redis-paused" the layer with its default 50 ms timeout (the GET
// before Begin and the SET after the commit each wait for it).
func BenchmarkRedisFast_NewMessageRedisBlackholed(b *testing.B) {
	srv := testenv.StartRedis(b, ownRedisPort)
	rdb := srv.Client()
	f := newFixture(b, rdb, time.Minute)
	require.NoError(b, rdb.Do(context.Background(), "CLIENT", "PAUSE", "600000", "ALL").Err())
	for _, v := range []struct {
		name  string
		store dedup.TxStore
	}{{"mysql", f.store}, {"redis-paused", f.layer}} {
		b.Run(v.name, func(b *testing.B) {
			h := f.chainOn(b, v.store, nil)
			run := testenv.Unique(v.name) // -count > 1 runs this function again: new events each time
			for i := 0; b.Loop(); i++ {
				o, err := f.handle(h, f.msg(fmt.Sprintf("%s-%s-%d", f.prefix, run, i)))
				if err != nil || o.Kind != consumer.KindProcessed {
					b.Fatalf("outcome %v, err %v", o, err)
				}
			}
		})
	}
}

// S8 with a Redis that accepts connections but never answers (a network partition or a stopped process;
// CLIENT PAUSE here): each lookup and each key write waits for the whole timeout (50 ms by default), so five
// new messages would cost ten timeouts, half a second, and 20 consume goroutines would drain at most about
// 200 messages/s (see BenchmarkRedisFast_NewMessageRedisBlackholed: about 100 ms per message against about
// 1 ms without the layer). After the first timeout the layer leaves Redis alone for a while: the messages
// behind it fall through at once, counted as skipped; MySQL decides every one of them.
func TestRedisFast_BlackholedRedisCostsOneTimeoutNotOnePerCommand(t *testing.T) {
	srv := testenv.StartRedis(t, ownRedisPort)
	f := newFixture(t, srv.Client(), time.Minute)
	h := f.chain(t, nil)
	require.NoError(t, srv.Client().Do(context.Background(), "CLIENT", "PAUSE", "10000", "ALL").Err())
	for i := range 5 {
		o, err := f.handle(h, f.msg(fmt.Sprintf("%s-%d", f.prefix, i)))
		require.NoError(t, err)
		require.Equal(t, consumer.KindProcessed, o.Kind)
	}
	f.ledger.RequireOncePerEvent(t, 5)
	assert.Equal(t, 1, f.obs.get(redisfast.ReasonTimeout)+f.obs.get(redisfast.ReasonMarkFailed),
		"only the first command waited for the timeout")
	assert.Equal(t, 9, f.obs.get(redisfast.ReasonSkipped), "the other lookups and key writes were not sent")
}

// S8 on the store's own transaction pool (dedup.WithTxDSN, what the README wires): a duplicate MySQL
// decides writes the done key (the claim's 1062 is a failed statement, so the check that the row is not
// the transaction's own reads it back), and the next delivery is answered by Redis.
func TestRedisFast_DuplicateOnTheOwnPoolWritesTheDoneKey(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	f := newFixtureOn(t, db, store, testenv.Redis(t), time.Minute)
	ev := f.prefix + "-e"
	o, err := f.handle(f.chainOn(t, f.store, nil), f.msg(ev)) // processed without the layer: no key
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	h := f.chain(t, nil)
	for _, want := range []int{1, 1} { // the first duplicate misses and writes the key; the second hits it
		o, err := f.handle(h, f.msg(ev))
		require.NoError(t, err)
		assert.Equal(t, consumer.KindDuplicate, o.Kind)
		assert.Equal(t, want, f.obs.get(redisfast.ReasonMiss))
	}
	assert.Equal(t, 1, f.ledger.Count(t, ev))
	assert.Len(t, f.keysOfTest(t), 1)
}

// S8: Config.Timeout bounds a command only when the client honours the context's deadline: a client made with
// go-redis's defaults (ContextTimeoutEnabled false) waits for its own ReadTimeout instead (measured on a
// paused Redis: one Done took 5.4 s, not 50 ms). New refuses such a client, naming the option.
func TestRedisFast_ClientThatIgnoresTheContextDeadlineIsRefused(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = redisfast.New(store, rdb, redisfast.Config{Prefix: "p:", TTL: time.Second})
	require.Error(t, err, "a client on which Config.Timeout has no effect")
	assert.Contains(t, err.Error(), "ContextTimeoutEnabled")
}
