package redisfast_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
)

func TestNew_InvalidConfigNamesTheField(t *testing.T) {
	store := &dedup.Store{}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ok := redisfast.Config{Prefix: "p:", TTL: time.Second}
	for name, tc := range map[string]struct {
		cfg  redisfast.Config
		want string
	}{
		"prefix":       {redisfast.Config{TTL: time.Second}, "Config.Prefix"},
		"ttl":          {redisfast.Config{Prefix: "p:"}, "Config.TTL"},
		"negative":     {redisfast.Config{Prefix: "p:", TTL: time.Second, Timeout: -1}, "Config.Timeout"},
		"over the max": {redisfast.Config{Prefix: "p:", TTL: time.Second, Timeout: 2 * time.Second}, "Config.Timeout"},
	} {
		_, err := redisfast.New(store, rdb, tc.cfg)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	_, err := redisfast.New(nil, rdb, ok)
	assert.ErrorContains(t, err, "store is nil")
	_, err = redisfast.New((*dedup.Store)(nil), rdb, ok) // the store of a dedup.NewStore whose error was dropped
	assert.ErrorContains(t, err, "store is a nil *dedup.Store")
	_, err = redisfast.New((*redisfast.Layer)(nil), rdb, ok)
	assert.ErrorContains(t, err, "store is a nil *redisfast.Layer")
	_, err = redisfast.New(store, nil, ok)
	assert.ErrorContains(t, err, "rdb is nil")
	_, err = redisfast.New(store, rdb, ok)
	assert.NoError(t, err)
}
