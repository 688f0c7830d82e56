package redisfast_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
)

// ownRedisPort is the port of the Redis these tests start and stop themselves (never the shared 6379): 0,
// a free port, so that two test runs (two worktrees) never start, pause or stop each other's server.
const ownRedisPort = 0

// testTimeout is the layer's Config.Timeout in these tests: the longest allowed, so that a GET on a machine
// loaded by -race and parallel test packages is not counted as a timeout where a test counts misses (with
// the 50 ms default, F16's third lookup was once a timeout). The timeout test pauses Redis for 3 s, longer.
const testTimeout = redisfast.MaxTimeout

// counts is an Observer that counts fall-throughs by reason.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) RedisFallback(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[reason]++
}

func (c *counts) get(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[reason]
}

// fixture is a chain Classify → EventID → Dedup(layer) → ledger handler on the real test database, with
// the layer on a real Redis.
type fixture struct {
	db     *sqlx.DB
	store  *dedup.Store
	layer  *redisfast.Layer
	rdb    *redis.Client
	obs    *counts
	group  string
	prefix string // key prefix and event IDs of this test
	ledger *testenv.Ledger
}

func newFixture(t testing.TB, rdb *redis.Client, ttl time.Duration) *fixture {
	t.Helper()
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	return newFixtureOn(t, db, store, rdb, ttl)
}

func newFixtureOn(t testing.TB, db *sqlx.DB, store *dedup.Store, rdb *redis.Client, ttl time.Duration) *fixture {
	t.Helper()
	prefix := testenv.Unique("rf")
	obs := &counts{}
	layer, err := redisfast.New(store, rdb, redisfast.Config{Prefix: prefix + ":", TTL: ttl, Timeout: testTimeout, Observer: obs})
	require.NoError(t, err)
	return &fixture{db: db, store: store, layer: layer, rdb: rdb, obs: obs, group: testenv.Unique("cg"),
		prefix: prefix, ledger: testenv.NewLedger(t, db, prefix)}
}

// chain runs h (after the ledger append) behind Dedup on the layer; h may be nil (the effect is the ledger row).
func (f *fixture) chain(t testing.TB, h dedup.TxHandler) consumer.Handler {
	t.Helper()
	return f.chainOn(t, f.layer, h)
}

// chainOn is chain with Dedup on store (the layer, or the database store alone).
func (f *fixture) chainOn(t testing.TB, store dedup.TxStore, h dedup.TxHandler) consumer.Handler {
	t.Helper()
	if h == nil {
		h = func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
			return consumer.Processed(), nil
		}
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	return testenv.Must(middleware.Chain(dedup.Handle(f.ledger.Handler(h)), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
}

// msg is a new physical message (its own MsgId) carrying eventID.
func (f *fixture) msg(eventID string) *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER", Body: []byte("{}")}}
	m.WithProperty("EVENT_ID", eventID)
	return m
}

func (f *fixture) handle(h consumer.Handler, m *primitive.MessageExt) (consumer.Outcome, error) {
	return h.Handle(context.Background(), testenv.NewDelivery(f.group, m))
}

// key is the done key of eventID in the fixture's group.
func (f *fixture) key(eventID string) string {
	d := testenv.NewDelivery(f.group, f.msg(eventID))
	d.EventID = eventID // what middleware.EventID sets
	return f.layer.Protocol().(txproto.Keyed).Key(d)
}

// keysOfTest returns every key under the fixture's prefix (done keys, or any marker).
func (f *fixture) keysOfTest(t *testing.T) []string {
	t.Helper()
	keys, err := f.rdb.Keys(context.Background(), f.prefix+":*").Result()
	require.NoError(t, err)
	return keys
}

// waitExpired polls until key is gone (at most 5 s).
func (f *fixture) waitExpired(t *testing.T, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := f.rdb.Exists(context.Background(), key).Result()
		return err == nil && n == 0
	}, 5*time.Second, 50*time.Millisecond, "done key %s never expired", key)
}
