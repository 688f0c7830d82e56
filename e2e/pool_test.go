package e2e

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// burstLedger is an Observer that records when each message was decided and how.
type burstLedger struct {
	mu    sync.Mutex
	at    []time.Time
	kinds map[consumer.Kind]int
}

func newBurstLedger() *burstLedger { return &burstLedger{kinds: map[consumer.Kind]int{}} }

func (l *burstLedger) Decided(_ *consumer.Delivery, dec consumer.Decision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, time.Now())
	l.kinds[dec.Outcome.Kind]++
}
func (l *burstLedger) InFlight(string, int)           {}
func (l *burstLedger) Lag(string, string, int64)      {}
func (l *burstLedger) Paused(string, string)          {}
func (l *burstLedger) Unpaused(string, time.Duration) {}

// longestGap returns the longest time between two consecutive decisions, and how many gaps were at least min.
func (l *burstLedger) longestGap(min time.Duration) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := append([]time.Time(nil), l.at...)
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	var longest time.Duration
	n := 0
	for i := 1; i < len(at); i++ {
		g := at[i].Sub(at[i-1])
		longest = max(longest, g)
		if g >= min {
			n++
		}
	}
	return longest, n
}

// decided returns how many messages were decided, and of what kind.
func (l *burstLedger) decided() (int, map[consumer.Kind]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, kinds := 0, map[consumer.Kind]int{}
	for k, c := range l.kinds {
		n += c
		kinds[k] = c
	}
	return n, kinds
}

// readsThroughApp is the handler of F40: it writes the order in its transaction, then reads once through
// the application's pool app, outside the transaction (a lookup a handler may well make).
func readsThroughApp(app *sqlx.DB) consumer.Handler {
	return dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		o, err := shop.HandleOrderCreated(ctx, tx, d)
		if err != nil {
			return o, err
		}
		var one int
		if err := app.GetContext(ctx, &one, `SELECT 1`); err != nil {
			return consumer.Outcome{}, err
		}
		return o, nil
	})
}

// f40Goroutines is Config.ConsumeGoroutines' default, which f40Config keeps.
const f40Goroutines = 20

// f40Config is F40's consumer: the default ConsumeGoroutines (20), a short HandlerTimeout and a single
// retry, so that a stall shows within seconds and a message it makes fail twice is dead-lettered.
func f40Config() consumer.Config {
	return consumer.Config{HandlerTimeout: 5 * time.Second, MaxAttempts: 1, DrainTimeout: 5 * time.Second}
}

// F40: the configuration that stalled (a store on the application's pool, no WithTxDSN, MaxOpenConns =
// ConsumeGoroutines = 20, a handler that reads through that pool) is refused by consumer.New with the fix,
// through middleware.Standard and through the store given to WithHealthProbe alike; the same pool grown to
// more than the consumer's handlers at once (20 for the topic and 20 for %RETRY%<group>) is accepted.
// Before the refusal, a burst of 2,000 queued messages through it stalled 5 times for the whole
// HandlerTimeout (5 s) and dead-lettered 73 healthy messages in 29 s.
func TestE2E_F40_StoreOnTheApplicationsPoolSizedToTheGoroutinesIsRefused(t *testing.T) {
	w := newWorld(t, 4)
	app := shoptest.MySQL(t)
	app.SetMaxOpenConns(f40Goroutines)
	store, err := dedup.NewStore(app)
	require.NoError(t, err)
	cfg := f40Config()
	cfg.NameServers, cfg.Group = w.ns, w.group
	cfg.Subscriptions = []consumer.Subscription{{Topic: w.topic}}
	standard := testenv.Must(middleware.Standard(readsThroughApp(app), middleware.StandardConfig{Store: store}))

	_, err = consumer.New(cfg, standard)
	require.Error(t, err, "the chain's store shares a pool of 20 with up to 40 handlers")
	for _, fix := range []string{"consumer.New: handler:", "dedup.WithTxDSN(dsn)", "dedup.Open(ctx, dsn)", "db.SetMaxOpenConns(41)",
		"bounded to 20 connections", "up to 40 handlers at once", "40 handlers = ConsumeGoroutines 20 × (1 subscribed topics + %RETRY%"} {
		assert.Contains(t, err.Error(), fix)
	}
	_, err = consumer.New(cfg, handWired(t, app, store), consumer.WithHealthProbe(store))
	require.Error(t, err, "a chain composed by hand is checked through the probe")
	assert.Contains(t, err.Error(), "consumer.New: WithHealthProbe: dedup:")

	app.SetMaxOpenConns(41)
	c, err := consumer.New(cfg, standard, consumer.WithHealthProbe(store))
	require.NoError(t, err, "a pool larger than the handlers at once")
	app.SetMaxOpenConns(40)
	err = c.Start()
	require.Error(t, err, "Start checks again: the pool shrank after New")
	assert.Contains(t, err.Error(), "consumer.Start: handler:")
	require.NoError(t, c.Shutdown(context.Background()))
}

// handWired is readsThroughApp behind the standard middlewares composed by hand (mw(h)), which Chain never
// sees: the store's check reaches consumer.New only through WithHealthProbe.
func handWired(t *testing.T, app *sqlx.DB, store *dedup.Store) consumer.Handler {
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	return middleware.Recover(nil).Wrap(middleware.Classify().Wrap(eventID.Wrap(middleware.Deadline(0).Wrap(testenv.Must(middleware.Dedup(store)).Wrap(readsThroughApp(app))))))
}

// F40: in the default wiring (dedup.Open: the store's transactions on a pool of its own; middleware.Standard)
// and with the application's pool sized as consumer.New asks, a handler that takes a second connection from
// the application's pool (MaxOpenConns = ConsumeGoroutines = 20 in the default wiring) never stalls the
// consumer: a burst of 2,000 messages already queued is drained with no pause of half the HandlerTimeout
// between two decisions, every message processed on its first delivery, one effect each, and %DLQ% empty.
func TestE2E_F40_HandlerReadingTheApplicationsPoolNeverStallsTheDefaultWiring(t *testing.T) {
	const events = 2000
	for _, c := range []struct {
		name  string
		store func(t *testing.T, app *sqlx.DB) *dedup.Store
	}{
		{"dedup.Open", func(t *testing.T, app *sqlx.DB) *dedup.Store {
			app.SetMaxOpenConns(f40Goroutines)
			store, err := dedup.Open(context.Background(), testenv.MySQLDSN())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			return store
		}},
		{"shared pool sized as consumer.New asks", func(t *testing.T, app *sqlx.DB) *dedup.Store {
			app.SetMaxOpenConns(2*f40Goroutines + 1)
			store, err := dedup.NewStore(app)
			require.NoError(t, err)
			return store
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, 4)
			app := shoptest.MySQL(t)
			store := c.store(t, app)
			plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: events}.Plan()
			require.NoError(t, err)
			w.send(plan.Messages...)
			l := newBurstLedger()
			start := time.Now()
			cons := w.start(f40Config(), testenv.Must(middleware.Standard(readsThroughApp(app), middleware.StandardConfig{Store: store})),
				consumer.WithObserver(l), consumer.WithHealthProbe(store))
			require.Eventually(t, func() bool { n, _ := l.decided(); return n >= events }, 3*time.Minute, 200*time.Millisecond)
			elapsed := time.Since(start)
			require.NoError(t, cons.Shutdown(context.Background()))

			// A stall ends when the handlers' deadline rolls their transactions back: a pause just under
			// HandlerTimeout between two decisions (4.98 s measured), which half of it catches.
			longest, stalls := l.longestGap(f40Config().HandlerTimeout / 2)
			n, kinds := l.decided()
			t.Logf("%d events in %s (consumer start included): longest pause between decisions %s, %d pauses ≥ HandlerTimeout/2, decisions %v",
				events, elapsed.Round(100*time.Millisecond), longest.Round(10*time.Millisecond), stalls, kinds)
			assert.Zero(t, stalls, "no pause of half the HandlerTimeout or more")
			assert.Equal(t, map[consumer.Kind]int{consumer.KindProcessed: events}, kinds, "every message processed at its first delivery")
			assert.Equal(t, events, n)
			orders, _, err := shop.Effects(w.ctx, app, w.run)
			require.NoError(t, err)
			assert.Equal(t, events, orders, "one effect per event")
			w.requireNoDeadLetters()
		})
	}
}
