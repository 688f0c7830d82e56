package redisfast_test

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// fastDedup is the "Redis fast path" wiring of docs/configuration.md, line for line; Example keeps it compiling.
func fastDedup(store *dedup.Store, reg prometheus.Registerer) (middleware.Middleware, func() error, error) {
	rdb := redis.NewClient(redisfast.ClientOptions("127.0.0.1:6379")) // one dial, no retries: a dead Redis fails fast
	fallbacks, err := metrics.NewRedisFallbacks(reg)                  // rmqguard_redis_fallbacks_total{reason}
	if err != nil {
		return middleware.Middleware{}, nil, err
	}
	fast, err := redisfast.New(store, rdb, redisfast.Config{Prefix: "inventory:", TTL: 24 * time.Hour, Observer: fallbacks})
	if err != nil {
		return middleware.Middleware{}, nil, err // an invalid Config names the field
	}
	mw, err := middleware.Dedup(fast) // instead of middleware.Dedup(store); the store stays the health probe
	return mw, rdb.Close, err
}

// Example wraps the dedup store in the Redis fast path: middleware.Dedup then asks Redis for a done key
// before it opens a transaction, and MySQL decides whenever Redis has no answer. It is compiled, not run:
// it needs MariaDB and Redis (the S8 and F16 tests run it for real).
func Example() {
	_ = fastDedup
}
