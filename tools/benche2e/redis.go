package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Settings of the duplicates-redis variant: the done keys' time to live (longer than any run) and how many
// keys one pipeline writes or one DEL removes.
const (
	redisTTL   = time.Hour
	redisChunk = 1000
)

// openRedis connects to the Redis at addr for the duplicates-redis variant and PINGs it. When it does not
// answer, the returned error becomes the variant's n/a reason; the client is closed by closeRedis.
func openRedis(ctx context.Context, addr string) (*redis.Client, error) {
	rdb := redis.NewClient(redisfast.ClientOptions(addr))
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ping Redis at %s (-redis): %w", addr, err)
	}
	return rdb, nil
}

// redisPrefix is the key prefix (redisfast.Config.Prefix) of every done key of the run.
func (env *environment) redisPrefix() string { return "rmqguard-benche2e:" + env.run + ":" }

// startDuplicatesRedis drains b like the duplicates variant, with the store wrapped in a redisfast.Layer
// whose done keys of all b's events are written first (by the layer's own Key), so that every message is a
// duplicate answered by one GET. Fall-throughs to MySQL are counted and reported after the drain.
func startDuplicatesRedis(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	if env.rdb == nil {
		return nil, errNotAvailable{env.rdbErr.Error()}
	}
	if err := markProcessed(ctx, env, group, b); err != nil {
		return nil, err
	}
	obs := &fallbacks{}
	stop, err := startRmqguard(ctx, env, o, b, group, tr, 1, func(store *dedup.Store) (dedup.TxStore, error) {
		layer, err := redisfast.New(store, env.rdb, redisfast.Config{Prefix: env.redisPrefix(), TTL: redisTTL, Timeout: o.redisTimeout, Observer: obs})
		if err != nil {
			return nil, err
		}
		// Before the consumer starts: no message may miss its key.
		return layer, markDone(ctx, env.rdb, layer, group, b)
	})
	if err != nil {
		return nil, err
	}
	return func() {
		stop()
		if s := obs.String(); s != "" {
			fmt.Fprintf(env.log, "  %s: Redis fell through to MySQL: %s\n", group, s)
		}
	}, nil
}

// markDone writes, in pipelines of redisChunk, the done key of each of b's events in group's scope as the
// layer names it (the Key of its protocol, for a delivery carrying the event ID), holding the message ID "prefilled" like
// the processed_event rows of markProcessed, with the TTL redisTTL.
func markDone(ctx context.Context, rdb *redis.Client, layer *redisfast.Layer, group string, b backlog) error {
	key, ok := layer.Protocol().(txproto.Keyed)
	if !ok {
		return fmt.Errorf("the Redis layer's protocol %T names no keys", layer.Protocol())
	}
	for from := 0; from < b.n; from += redisChunk {
		pipe := rdb.Pipeline()
		for i := from; i < min(from+redisChunk, b.n); i++ {
			d := testenv.NewDelivery(group, &primitive.MessageExt{Message: primitive.Message{Topic: b.topic}})
			d.EventID = b.prefix + strconv.Itoa(i)
			pipe.Set(ctx, key.Key(d), "prefilled", redisTTL)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("write done keys of %s for %s: %w", b.topic, group, err)
		}
	}
	return nil
}

// deleteRedisKeys removes every key under prefix (SCAN, then DEL redisChunk at a time).
func deleteRedisKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", redisChunk).Iterator()
	batch := make([]string, 0, redisChunk)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := rdb.Del(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == redisChunk {
			if err := flush(); err != nil {
				return fmt.Errorf("delete Redis keys %s*: %w", prefix, err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan Redis keys %s*: %w", prefix, err)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("delete Redis keys %s*: %w", prefix, err)
	}
	return nil
}

// fallbacks is the layer's Observer in the benchmark: fall-throughs by reason.
type fallbacks struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *fallbacks) RedisFallback(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[reason]++
}

// String lists the counts as "reason=n …" in reason order; "" when there were none.
func (f *fallbacks) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := make([]string, 0, len(f.n))
	for _, r := range slices.Sorted(maps.Keys(f.n)) {
		parts = append(parts, fmt.Sprintf("%s=%d", r, f.n[r]))
	}
	return strings.Join(parts, " ")
}
