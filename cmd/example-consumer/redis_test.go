package main

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// counterValue sums the series of counter name on reg whose labels include match; -1 when the family is
// not registered or has no series.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, match map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if matches(labels, match) {
				total += m.GetCounter().GetValue()
			}
		}
		return total
	}
	return -1
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// S8 in the example consumer: with --redis-addr, run's Dedup asks Redis first. The first delivery of an
// event misses (counted in rmqguard_redis_fallbacks_total{reason="miss"} on the consumer's registry) and
// MySQL decides; after its commit the done key answers a re-send as a duplicate, counted in the example's
// rmqguard_example_redis_duplicates_total; the effect happened once.
func TestExampleConsumer_WiresTheRedisFastPath(t *testing.T) {
	db := shoptest.MySQL(t)
	rdb := testenv.Redis(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	prefix := testenv.Unique("exrf") + ":"
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	reg := prometheus.NewRegistry()
	fast, closeRedis, err := fastPath(t.Context(), store, reg,
		redisOptions{addr: rdb.Options().Addr, prefix: prefix, ttl: time.Minute}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(closeRedis)

	effects := 0
	// Composed by hand: the deliveries below carry their event ID already (Chain wants EventID before Dedup).
	h := testenv.Must(middleware.Dedup(fast)).Wrap(dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		effects++
		return consumer.Processed(), nil
	}))
	group, eventID := testenv.Unique("cg"), testenv.Unique("ev")
	deliver := func() consumer.Outcome {
		d := testenv.NewDelivery(group, &primitive.MessageExt{MsgId: testenv.Unique("msg"),
			Message: primitive.Message{Topic: "SHOP_TEST", Body: []byte("{}")}})
		d.EventID = eventID
		o, err := h.Handle(t.Context(), d)
		require.NoError(t, err)
		return o
	}

	require.Equal(t, consumer.KindProcessed, deliver().Kind)
	assert.Equal(t, 1.0, counterValue(t, reg, "rmqguard_redis_fallbacks_total", map[string]string{"reason": "miss"}))
	assert.Equal(t, -1.0, counterValue(t, reg, redisDuplicatesMetric, nil), "nothing answered by Redis yet")

	o := deliver()
	require.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, "resend", o.Cause)
	assert.Equal(t, 1.0, counterValue(t, reg, redisDuplicatesMetric, map[string]string{"group": group, "topic": "SHOP_TEST"}))
	assert.Equal(t, 1.0, counterValue(t, reg, "rmqguard_redis_fallbacks_total", nil), "the duplicate did not fall through")
	assert.Equal(t, 1, effects)
}

// --no-redis (or no address) leaves the store as it is and registers nothing about Redis.
func TestExampleConsumer_NoRedisKeepsTheStore(t *testing.T) {
	store, err := dedup.NewStore(shoptest.MySQL(t))
	require.NoError(t, err)
	for _, o := range []redisOptions{{addr: "127.0.0.1:6379", off: true, prefix: "p:", ttl: time.Minute}, {prefix: "p:", ttl: time.Minute}} {
		reg := prometheus.NewRegistry()
		fast, closeRedis, err := fastPath(t.Context(), store, reg, o, zap.NewNop())
		require.NoError(t, err)
		closeRedis()
		assert.Same(t, store, fast)
		families, err := reg.Gather()
		require.NoError(t, err)
		assert.Empty(t, families)
	}
}

// The Redis flags fail at start with the flag named, and only when the fast path is on.
func TestRunOptions_InvalidRedisFlagsNameTheFlag(t *testing.T) {
	ok := redisOptions{addr: "127.0.0.1:6379", prefix: "rmqguard:", ttl: time.Hour}
	require.NoError(t, ok.validate(168*time.Hour))
	require.NoError(t, redisOptions{}.validate(time.Hour), "off: nothing to check")

	cases := map[string]struct {
		o         redisOptions
		retention time.Duration
	}{
		"--redis-prefix is empty": {redisOptions{addr: ok.addr, ttl: time.Hour}, 0},
		"--redis-ttl 0s":          {redisOptions{addr: ok.addr, prefix: "p:"}, 0},
		"--redis-ttl 2h0m0s: longer than --dedup-retention 1h0m0s": {redisOptions{addr: ok.addr, prefix: "p:", ttl: 2 * time.Hour}, time.Hour},
		"--redis-timeout 2s": {redisOptions{addr: ok.addr, prefix: "p:", ttl: time.Hour, timeout: 2 * time.Second}, 0},
	}
	for want, c := range cases {
		err := c.o.validate(c.retention)
		require.Error(t, err, want)
		assert.Contains(t, err.Error(), want)
	}
}

// The demo's Redis line splits the duplicates between Redis and MySQL, or says the fast path never answered.
func TestDemo_RedisLine(t *testing.T) {
	assert.Equal(t, "duplicates: 162 answered by Redis, 12 by MySQL; 1500 Redis fall-throughs to MySQL (rmqguard_redis_fallbacks_total)",
		redisLine(counts{duplicates: 174, redisAnswered: 162, fallbacks: 1500}))
	assert.Equal(t, "duplicates: 162, all answered by MySQL (no Redis fast path, or it never answered)",
		redisLine(counts{duplicates: 162}))
}
