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
	assert.Equal(t, 1, f.obs.get("timeout")+f.obs.get("mark_failed"),
		"only the first command waited for the timeout")
	assert.Equal(t, 9, f.obs.get("skipped"), "the other lookups and key writes were not sent")
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
