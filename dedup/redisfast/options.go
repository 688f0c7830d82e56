package redisfast

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// clientTimeout is the dial, read and write timeout of ClientOptions: a fast path must give up quickly.
const clientTimeout = 200 * time.Millisecond

// ClientOptions returns go-redis options for the Redis at addr ("host:port") suited to a Layer: each
// command bounded by its context's deadline (ContextTimeoutEnabled, so Config.Timeout applies), no command
// retries (MaxRetries -1), one dial attempt (DialerRetries 1; go-redis's default of 5 attempts 100 ms apart
// would turn a Redis that is down into a timeout on every message), and clientTimeout for dial, read and
// write. Everything else (pool size 10 per GOMAXPROCS, no password, database 0) is go-redis's default; set
// the returned fields before redis.NewClient to change them.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: clientTimeout, ReadTimeout: clientTimeout, WriteTimeout: clientTimeout}
}
