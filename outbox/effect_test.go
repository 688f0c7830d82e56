package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/outboxadmin"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/outbox"
)

// effects is one test's own dedup schema and outbox table on MariaDB (a unique prefix) and a consumer
// whose callback the test calls; its handler records the effect "notify" for each event.
type effects struct {
	db     *sqlx.DB
	prefix string
	store  *dedup.Store
	group  string
	up     *testenv.Callback
}

func newEffects(t *testing.T, ob func(*dedup.Store) *outbox.Outbox) (*effects, *outbox.Outbox) {
	t.Helper()
	db := testenv.MySQL(t)
	run := testenv.Unique("fx")
	prefix := "fx" + strings.TrimPrefix(run, "fx-") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	ctx := context.Background()
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
	o := ob(store)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := dedup.Handle(func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		_, err := o.Do(ctx, d, "notify", d.Msg.Body)
		return consumer.Processed(), err
	})
	chain := testenv.Must(middleware.Chain(h, middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(store))))
	group := "fx-" + run
	up := testenv.NewCallback(t, consumer.Config{Group: group, Subscriptions: []consumer.Subscription{{Topic: "RMQGUARD_FX"}}}, chain)
	return &effects{db: db, prefix: prefix, store: store, group: group, up: up}, o
}

// deliver delivers event id with body and requires it acknowledged.
func (e *effects) deliver(t *testing.T, id, body string) {
	t.Helper()
	m := &primitive.MessageExt{MsgId: id + "-msg", Message: primitive.Message{Topic: "RMQGUARD_FX", Body: []byte(body)}}
	m.WithProperty("EVENT_ID", id)
	require.Equal(t, rmq.ConsumeSuccess, e.up.Deliver(t, false, m))
}

func (e *effects) count(t *testing.T, status string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Get(&n, "SELECT COUNT(*) FROM "+e.prefix+outboxsql.Table+" WHERE status = ?", status))
	return n
}

// receiver records the calls of the effect.
type receiver struct {
	mu    sync.Mutex
	calls []outbox.Effect
	at    []time.Time
	up    func() bool
}

func (r *receiver) notify(_ context.Context, e outbox.Effect) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, e)
	r.at = append(r.at, time.Now())
	if !r.up() {
		return errors.New("receiver down: connection refused")
	}
	return nil
}

func (r *receiver) snapshot() ([]outbox.Effect, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Effect(nil), r.calls...), append([]time.Time(nil), r.at...)
}

func run(t *testing.T, o *outbox.Outbox) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// F34: the effect's receiver is down (3 s here, 20 s in the chaos scenario): the effect is retried with
// growing waits, not in a loop, and delivered once the receiver is back; every call carries the same
// idempotency key, derived from the event ID and the effect's name.
func TestEffect_ReceiverDownIsRetriedWithBackoffAndDeliveredWithOneIdempotencyKey(t *testing.T) {
	start := time.Now()
	rcv := &receiver{up: func() bool { return time.Since(start) > 3*time.Second }}
	e, ob := newEffects(t, func(s *dedup.Store) *outbox.Outbox {
		ob, err := outbox.New(s, outbox.Config{Effects: map[string]outbox.EffectFunc{"notify": rcv.notify}, MaxBackoff: time.Second, MaxEffectAttempts: 50})
		require.NoError(t, err)
		return ob
	})
	run(t, ob)
	e.deliver(t, "order-1-paid", `{"order":1}`)
	require.Eventually(t, func() bool { return e.count(t, outboxsql.StatusSent) == 1 }, 20*time.Second, 100*time.Millisecond)

	calls, at := rcv.snapshot()
	require.GreaterOrEqual(t, len(calls), 3, "retried while the receiver was down")
	require.LessOrEqual(t, len(calls), 10, "backoff: 100 ms doubling to 1 s, not a loop")
	key := outboxsql.EventID(e.group, "order-1-paid", "notify")
	for i, c := range calls {
		require.Equal(t, key, c.IdempotencyKey, "call %d", i)
		require.Equal(t, `{"order":1}`, string(c.Payload))
		require.Equal(t, i+1, c.Attempt)
	}
	for i := 2; i < len(at); i++ {
		require.GreaterOrEqual(t, at[i].Sub(at[i-1]), at[i-1].Sub(at[i-2])*7/10, "waits grow: %v", at)
	}
	time.Sleep(500 * time.Millisecond)
	after, _ := rcv.snapshot()
	require.Len(t, after, len(calls), "no call after the one that succeeded")
}

// F34: an effect that exhausts its attempts is parked with its last error, listed, and run again by
// Retry; a parked effect does not hold up another event's effect.
func TestEffect_ExhaustedIsParkedListedAndRetried(t *testing.T) {
	var mu sync.Mutex
	healthy := map[string]bool{"order-2-paid": true}
	m, err := metrics.NewOutbox(prometheus.NewRegistry())
	require.NoError(t, err)
	rcv := &receiver{}
	rcv.up = func() bool { return healthy[strings.Split(string(rcv.calls[len(rcv.calls)-1].Payload), ":")[0]] }
	e, ob := newEffects(t, func(s *dedup.Store) *outbox.Outbox {
		ob, err := outbox.New(s, outbox.Config{Effects: map[string]outbox.EffectFunc{"notify": func(ctx context.Context, ef outbox.Effect) error {
			mu.Lock()
			defer mu.Unlock()
			return rcv.notify(ctx, ef)
		}}, MaxBackoff: 200 * time.Millisecond, MaxEffectAttempts: 3, PollInterval: 100 * time.Millisecond, Observer: m})
		require.NoError(t, err)
		return ob
	})
	run(t, ob)
	e.deliver(t, "order-1-paid", "order-1-paid:x")
	e.deliver(t, "order-2-paid", "order-2-paid:y")
	require.Eventually(t, func() bool { return e.count(t, outboxsql.StatusParked) == 1 && e.count(t, outboxsql.StatusSent) == 1 },
		20*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.ParkedRows) == 1 }, 5*time.Second, 50*time.Millisecond, "parked-rows gauge")
	require.Equal(t, 1.0, testutil.ToFloat64(m.Parked.WithLabelValues(outboxsql.KindEffect)))
	require.Equal(t, 3.0, testutil.ToFloat64(m.Effects.WithLabelValues("notify", "failed")), "order-1's 3 runs")
	require.Equal(t, 1.0, testutil.ToFloat64(m.Effects.WithLabelValues("notify", "ok")), "order-2's run")
	parked, err := outboxadmin.List(context.Background(), e.db, e.prefix, outboxsql.StatusParked, 10)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, "order-1-paid", parked[0].SourceEventID)
	require.Equal(t, 3, parked[0].Attempts)
	require.Contains(t, parked[0].LastError, "receiver down")

	mu.Lock()
	healthy["order-1-paid"] = true
	mu.Unlock()
	n, err := outboxadmin.Retry(context.Background(), e.db, e.prefix, parked[0].ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	ob.Wake()
	require.Eventually(t, func() bool { return e.count(t, outboxsql.StatusSent) == 2 }, 20*time.Second, 100*time.Millisecond)
	mu.Lock()
	calls, _ := rcv.snapshot()
	mu.Unlock()
	var first []outbox.Effect
	for _, c := range calls {
		if strings.HasPrefix(string(c.Payload), "order-1-paid") {
			first = append(first, c)
		}
	}
	require.Len(t, first, 4, "3 attempts, parked, then 1 after Retry")
	require.Equal(t, 1, first[3].Attempt, "Retry resets the attempts")
	require.Equal(t, first[0].IdempotencyKey, first[3].IdempotencyKey)
}
