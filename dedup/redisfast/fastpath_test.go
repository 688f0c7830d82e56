package redisfast_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
)

// S8: a done key answers a duplicate with zero database round trips: the store's own pool is closed before
// the duplicates arrive, so any statement would fail.
func TestRedisFast_DoneKeyAnswersDuplicatesWithoutTheDatabase(t *testing.T) {
	own, err := sqlx.Open("mysql", testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	store, err := dedup.NewStore(own)
	require.NoError(t, err)
	f := newFixtureOn(t, testenv.MySQL(t), store, testenv.Redis(t), time.Minute)
	h := f.chain(t, nil)
	ev := f.prefix + "-e"
	first := f.msg(ev)

	o, err := f.handle(h, first)
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	stored, err := f.rdb.Get(context.Background(), f.key(ev)).Result()
	require.NoError(t, err, "the done key is written after the commit")
	assert.Equal(t, first.MsgId, stored)
	ttl, err := f.rdb.TTL(context.Background(), f.key(ev)).Result()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= time.Minute, "the done key has the TTL, got %v", ttl)
	require.NoError(t, own.Close())

	again, err := f.handle(h, first)
	require.NoError(t, err, "no database needed")
	assert.Equal(t, consumer.KindDuplicate, again.Kind)
	assert.Equal(t, causelabel.Redelivery, again.Cause, "the same message: its ID is the one the key holds")
	resent, err := f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, resent.Kind)
	assert.Equal(t, causelabel.Resend, resent.Cause)
	assert.Equal(t, 1, f.ledger.Count(t, ev), "applied once")
	assert.Equal(t, 1, f.obs.get("miss"), "only the first delivery missed")
}

// S8: the done key expired → MySQL decides (a duplicate, one effect), the miss is counted; the duplicate
// writes the key again, so the next delivery is answered by Redis.
func TestRedisFast_ExpiredDoneKeyMySQLDecides(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Second)
	h := f.chain(t, nil)
	ev := f.prefix + "-e"

	o, err := f.handle(h, f.msg(ev))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	f.waitExpired(t, f.key(ev))
	misses := f.obs.get("miss")

	o, err = f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind, "MySQL's unique key decided")
	assert.Equal(t, causelabel.Resend, o.Cause, "the cause read from the stored row")
	assert.Equal(t, misses+1, f.obs.get("miss"), "the miss is counted")
	assert.Equal(t, 1, f.ledger.Count(t, ev), "applied once")

	o, err = f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, misses+1, f.obs.get("miss"), "answered by the key the duplicate wrote")
	assert.Equal(t, 1, f.ledger.Count(t, ev))
}

// S8: Redis dies in the middle of the run → MySQL decides every delivery, one effect per event, errors
// counted, no message fails.
func TestRedisFast_RedisDownMidRunMySQLDecides(t *testing.T) {
	srv := testenv.StartRedis(t, ownRedisPort)
	f := newFixture(t, srv.Client(), time.Minute)
	h := f.chain(t, nil)
	a, b := f.prefix+"-a", f.prefix+"-b"

	o, err := f.handle(h, f.msg(a))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	srv.Stop()

	for _, step := range []struct {
		ev   string
		want consumer.Kind
	}{{a, consumer.KindDuplicate}, {b, consumer.KindProcessed}, {b, consumer.KindDuplicate}} {
		o, err := f.handle(h, f.msg(step.ev))
		require.NoError(t, err, "a Redis outage is never fatal")
		assert.Equal(t, step.want, o.Kind, step.ev)
	}
	assert.Equal(t, 1, f.ledger.Count(t, a))
	assert.Equal(t, 1, f.ledger.Count(t, b))
	assert.Equal(t, 1, f.obs.get("error")+f.obs.get("timeout"),
		"the first lookup after the stop failed; the cool-down (Config.Cooldown) spared Redis the rest")
	assert.Equal(t, 6, fallThroughs(f.obs), "3 lookups and 3 key writes (b's commit, a's and b's duplicate), each counted once")
}

// S8: a Redis that does not answer (CLIENT PAUSE) costs at most the timeout: counted as a timeout, MySQL
// decides.
func TestRedisFast_RedisTimeoutFallsThroughToMySQL(t *testing.T) {
	srv := testenv.StartRedis(t, ownRedisPort)
	f := newFixture(t, srv.Client(), time.Minute)
	h := f.chain(t, nil)
	ev := f.prefix + "-e"
	o, err := f.handle(h, f.msg(ev))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	require.NoError(t, srv.Client().Do(context.Background(), "CLIENT", "PAUSE", "3000", "ALL").Err())

	o, err = f.handle(h, f.msg(ev))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, causelabel.Resend, o.Cause, "from the stored row")
	assert.Equal(t, 1, f.obs.get("timeout"))
	assert.Equal(t, 1, f.ledger.Count(t, ev))
}

// S8: Redis stopped for the whole run: one effect per event, every lookup and every key write counted as a
// fall-through, no delivery fails; concurrent deliveries of an event are settled by the unique key.
func TestRedisFast_RedisStoppedForTheWholeRunChangesOnlySpeed(t *testing.T) {
	srv := testenv.StartRedis(t, ownRedisPort)
	rdb := srv.Client()
	srv.Stop()
	f := newFixture(t, rdb, time.Minute)
	h := f.chain(t, nil)
	const events, copies = 20, 3

	kinds := make(chan consumer.Kind, events*copies)
	var wg sync.WaitGroup
	for i := range events {
		for range copies {
			m := f.msg(f.prefix + "-e" + string(rune('a'+i)))
			wg.Go(func() {
				o, err := f.handle(h, m)
				assert.NoError(t, err)
				kinds <- o.Kind
			})
		}
	}
	wg.Wait()
	close(kinds)
	got := map[consumer.Kind]int{}
	for k := range kinds {
		got[k]++
	}
	assert.Equal(t, map[consumer.Kind]int{consumer.KindProcessed: events, consumer.KindDuplicate: events * (copies - 1)}, got)
	f.ledger.RequireOncePerEvent(t, events)
	assert.GreaterOrEqual(t, f.obs.get("error")+f.obs.get("timeout"), 1, "Redis was asked and failed")
	assert.Equal(t, 2*events*copies, fallThroughs(f.obs), "every lookup and every commit's and duplicate's key write, counted once")
}

// S8: the fall-throughs reach Prometheus: metrics.RedisFallbacks as the layer's Observer counts a Redis that
// is down as rmqguard_redis_fallbacks_total{reason="error"} and the key write in the cool-down as skipped.
func TestRedisFast_FallbacksExportedAsPrometheusCounter(t *testing.T) {
	srv := testenv.StartRedis(t, ownRedisPort)
	rdb := srv.Client()
	srv.Stop()
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	fallbacks, err := metrics.NewRedisFallbacks(prometheus.NewRegistry())
	require.NoError(t, err)
	f := newFixtureOn(t, db, store, rdb, time.Minute)
	f.layer, err = redisfast.New(store, rdb, redisfast.Config{Prefix: f.prefix + ":", TTL: time.Minute, Observer: fallbacks})
	require.NoError(t, err)
	h := f.chain(t, nil)

	o, err := f.handle(h, f.msg(f.prefix+"-e"))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, 1.0, testutil.ToFloat64(fallbacks.Total.WithLabelValues("error")))
	assert.Equal(t, 1.0, testutil.ToFloat64(fallbacks.Total.WithLabelValues("skipped")),
		"the key write falls in the cool-down the failed lookup started")
	assert.Equal(t, 1, f.ledger.Count(t, f.prefix+"-e"))
}

var _ redisfast.Observer = (*metrics.RedisFallbacks)(nil)

// fallThroughs is the number of Redis commands that fell through or were not sent, whatever the reason
// (misses excepted).
func fallThroughs(c *counts) int {
	return c.get("error") + c.get("timeout") + c.get("mark_failed") +
		c.get("skipped")
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
		assert.Equal(t, want, f.obs.get("miss"))
	}
	assert.Equal(t, 1, f.ledger.Count(t, ev))
	assert.Len(t, f.keysOfTest(t), 1)
}
