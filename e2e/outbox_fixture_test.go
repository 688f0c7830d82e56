package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/outbox"
)

// fixture (the outbox tests') is one test's own dedup schema and outbox table (a unique table prefix, so that no other
// test's relay sees its rows), its own topic on the real broker, and a store.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	db     *sqlx.DB
	prefix string
	store  *dedup.Store
	ns     []string
	topic  string
	run    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rlog.SetLogLevel("error")
	db := shoptest.MySQL(t)
	ns := []string{testenv.NameServer(t)}
	broker := testenv.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	run := testenv.Unique("ob")
	prefix := "ob" + strings.TrimPrefix(run, "ob-") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	_, err = dedup.Migrate(ctx, db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	_, err = outbox.Migrate(ctx, db.DB, prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, tb := range append(dedupsql.Names(prefix), prefix+outboxsql.Table, prefix+outboxsql.VersionTable) {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix), dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	topic := "RMQGUARD_OB_" + strings.ReplaceAll(run, "-", "_")
	require.NoError(t, rmq.EnsureTopic(ctx, ns, broker, topic, 4))
	return &fixture{t: t, ctx: ctx, db: db, prefix: prefix, store: store, ns: ns, topic: topic, run: run}
}

// outbox returns an Outbox on the fixture's store with cfg (NameServers set unless noBroker).
func (f *fixture) outbox(cfg outbox.Config) *outbox.Outbox {
	f.t.Helper()
	if cfg.NameServers == nil {
		cfg.NameServers = f.ns
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	ob, err := outbox.New(f.store, cfg)
	require.NoError(f.t, err)
	return ob
}

// relay runs ob.Run until the returned stop is called (or the test ends); stop waits for Run to return.
func (f *fixture) relay(ob *outbox.Outbox) (stop func()) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(f.t, <-done)
		})
	}
	f.t.Cleanup(stop)
	return stop
}

// upstream is a consumer (group of its own) whose callback the test calls, running h under the
// recommended dedup chain on the fixture's store.
func (f *fixture) upstream(h dedup.TxHandler) *testenv.Callback {
	f.t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(f.t, err)
	chain := testenv.Must(middleware.Chain(dedup.Handle(h), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
	cfg := consumer.Config{Group: "up-" + f.run, Subscriptions: []consumer.Subscription{{Topic: upTopic}}}
	return testenv.NewCallback(f.t, cfg, chain)
}

// upTopic is the topic of the upstream consumers (nothing is sent to it: the test delivers).
const upTopic = "RMQGUARD_OB_UP"

// upMsg is an incoming message of event id, delivery attempt (ReconsumeTimes) attempt.
func upMsg(id string, attempt int) *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: id + "-msg", ReconsumeTimes: int32(attempt), Message: primitive.Message{Topic: upTopic, Body: []byte(`{}`)}}
	m.WithProperty("EVENT_ID", id)
	return m
}

// got is one message the downstream consumer applied.
type got struct {
	EventID string
	Body    string
	Queue   int
}

// downstream is a real rmqguard consumer (orderly, dedup on the fixture's store, group of its own) of
// the fixture's topic from its first offset; it records each event it applied (its transaction
// committed), in order, and a ledger counts the applies per event ID.
type downstream struct {
	mu      sync.Mutex
	applied []got
	ledger  *testenv.Ledger
}

func (f *fixture) downstream() *downstream {
	f.t.Helper()
	ds := &downstream{ledger: testenv.NewLedger(f.t, f.db, f.run)}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(f.t, err)
	h := ds.ledger.Handler(func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		err := dedup.AfterCommit(ctx, func(context.Context) {
			ds.mu.Lock()
			defer ds.mu.Unlock()
			ds.applied = append(ds.applied, got{EventID: d.EventID, Body: string(d.Msg.Body), Queue: d.Msg.Queue.QueueId})
		})
		return consumer.Processed(), err
	})
	chain := testenv.Must(middleware.Chain(dedup.Handle(h), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
	cfg := consumer.Config{NameServers: f.ns, Group: "down-" + f.run, Subscriptions: []consumer.Subscription{{Topic: f.topic}},
		StartFromFirstOffset: true, Orderly: true, SuspendTime: 100 * time.Millisecond, DrainTimeout: 5 * time.Second,
		InstanceName: "down-" + f.run}
	c, err := consumer.New(cfg, chain)
	require.NoError(f.t, err)
	require.NoError(f.t, c.Start())
	f.t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return ds
}

func (ds *downstream) snapshot() []got {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return append([]got(nil), ds.applied...)
}

// waitApplied waits until n distinct events were applied.
func (ds *downstream) waitApplied(t *testing.T, n int, within time.Duration) []got {
	t.Helper()
	require.Eventually(t, func() bool {
		seen := map[string]bool{}
		for _, g := range ds.snapshot() {
			seen[g.EventID] = true
		}
		return len(seen) >= n
	}, within, 100*time.Millisecond, "downstream applied fewer than %d events", n)
	return ds.snapshot()
}

// count returns the outbox rows of the fixture with status.
func (f *fixture) count(status string) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.db.Get(&n, "SELECT COUNT(*) FROM "+f.prefix+outboxsql.Table+" WHERE status = ?", status))
	return n
}
