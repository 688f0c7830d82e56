package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/metrics"
)

// redisDuplicatesMetric counts, per group and topic, the duplicates the Redis fast path answered (a "done"
// key, no database round trip); the demo prints it next to rmqguard_duplicates_total. The example's own
// counter, not the library's: the layer reports only its fall-throughs.
const redisDuplicatesMetric = "rmqguard_example_redis_duplicates_total"

// redisOptions are the run flags of the Redis fast path.
type redisOptions struct {
	// addr is Redis's host:port (--redis-addr, else RMQGUARD_REDIS_ADDR); "" or off leaves the fast path out.
	addr string
	off  bool
	// prefix, ttl and timeout are redisfast.Config's Prefix, TTL and Timeout.
	prefix  string
	ttl     time.Duration
	timeout time.Duration
}

// enabled reports whether the fast path is wired.
func (o redisOptions) enabled() bool { return o.addr != "" && !o.off }

// validate rejects values redisfast.New would refuse, naming the flag, and a TTL longer than the dedup
// window (retention; 0: no janitor): a done key must not outlive the processed_event row it stands for.
func (o redisOptions) validate(retention time.Duration) error {
	if !o.enabled() {
		return nil
	}
	switch {
	case o.prefix == "":
		return errors.New("--redis-prefix is empty: keys of several applications would collide")
	case o.ttl <= 0:
		return fmt.Errorf("--redis-ttl %s: must be positive", o.ttl)
	case retention > 0 && o.ttl > retention:
		return fmt.Errorf("--redis-ttl %s: longer than --dedup-retention %s (a done key would outlive its row)", o.ttl, retention)
	case o.timeout < 0 || o.timeout > redisfast.MaxTimeout:
		return fmt.Errorf("--redis-timeout %s: must be between 0 (default %s) and %s", o.timeout, redisfast.DefaultTimeout, redisfast.MaxTimeout)
	}
	return nil
}

// fastPath wraps store in the Redis fast path when o enables it, with its fall-throughs counted on reg
// (rmqguard_redis_fallbacks_total) and the duplicates it answers counted in redisDuplicatesMetric; else it
// returns store. A Redis that does not answer PING at start is logged, not fatal: the layer falls through
// to MySQL until it answers. The returned function closes the client.
func fastPath(ctx context.Context, store *dedup.Store, reg prometheus.Registerer, o redisOptions, log *zap.Logger) (dedup.TxStore, func(), error) {
	if !o.enabled() {
		log.Info("redis fast path off", zap.Bool("no_redis", o.off))
		return store, func() {}, nil
	}
	fallbacks, err := metrics.NewRedisFallbacks(reg)
	if err != nil {
		return nil, nil, err
	}
	answered := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: redisDuplicatesMetric,
		Help: "Duplicates answered by the Redis fast path (a done key) without a database round trip.",
	}, []string{"group", "topic"})
	if err := reg.Register(answered); err != nil {
		return nil, nil, fmt.Errorf("register %s: %w", redisDuplicatesMetric, err)
	}
	rdb := redis.NewClient(redisfast.ClientOptions(o.addr))
	layer, err := redisfast.New(store, rdb, redisfast.Config{Prefix: o.prefix, TTL: o.ttl, Timeout: o.timeout, Observer: fallbacks})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		log.Warn("redis does not answer; every message asks MySQL until it does", zap.String("addr", o.addr), zap.Error(err))
	}
	log.Info("redis fast path on", zap.String("addr", o.addr), zap.String("prefix", o.prefix), zap.Duration("ttl", o.ttl))
	return countingLayer{layer: layer, answered: answered}, func() { _ = rdb.Close() }, nil
}

// countingLayer is the fast path with the duplicates it answers counted per group and topic: its
// protocol is the layer's with Done counted (the example's own counter, see redisDuplicatesMetric).
type countingLayer struct {
	layer    dedup.TxStore
	answered *prometheus.CounterVec
}

// Protocol returns the layer's protocol, its Done answers counted.
func (c countingLayer) Protocol() txproto.Store {
	return countingProtocol{Store: c.layer.Protocol(), answered: c.answered}
}

// countingProtocol is the protocol of a countingLayer.
type countingProtocol struct {
	txproto.Store
	answered *prometheus.CounterVec
}

// Done asks the layer and counts a "done" answer.
func (c countingProtocol) Done(ctx context.Context, d *consumer.Delivery) (string, bool) {
	cause, ok := c.Store.Done(ctx, d)
	if ok {
		c.answered.WithLabelValues(d.Group, d.Topic).Inc()
	}
	return cause, ok
}
