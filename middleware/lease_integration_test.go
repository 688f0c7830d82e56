package middleware_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/pending"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// F35: lease mode (middleware.Lease) on the real MariaDB. The handlers stand for a call to a payment API
// that cannot dedup: each call is counted, and the tests check who called, how often and whether the
// caller was told it took over a lease.

// leaseWorld is one test's store, ledger (business writes) and consumer group.
type leaseWorld struct {
	db     *sqlx.DB
	store  *dedup.Store
	ledger *testenv.Ledger
	run    string // the ledger's run
	group  string
}

func newLeaseWorld(t *testing.T) *leaseWorld {
	t.Helper()
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	run := testenv.Unique("lease")
	return &leaseWorld{db: db, store: store, ledger: testenv.NewLedger(t, db, run), run: run, group: testenv.Unique("cg")}
}

// chain is the recommended chain with Lease in Dedup's place around h, whose Processed result appends the
// event to the ledger in the handler's transaction.
func (w *leaseWorld) chain(t *testing.T, store *dedup.Store, lease time.Duration, h dedup.TxHandler) consumer.Handler {
	t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	chain := testenv.Must(middleware.Chain(dedup.Handle(w.ledger.Handler(h)), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, testenv.Must(middleware.Lease(store, lease))))
	require.NoError(t, pending.Refused(chain), "Chain accepts Lease in Dedup's place")
	return chain
}

// delivery is a delivery of event id as message msgID (another ID for each copy the producer sent).
func (w *leaseWorld) delivery(id, msgID string, attempt int) *consumer.Delivery {
	m := &primitive.MessageExt{MsgId: msgID, ReconsumeTimes: int32(attempt), Message: primitive.Message{Topic: "PAYMENT", Body: []byte(`{}`)}}
	m.WithProperty("EVENT_ID", id)
	d := testenv.NewDelivery(w.group, m)
	d.MaxAttempts = 16
	return d
}

// rows counts the event's rows in table (processed_event or event_lease).
func (w *leaseWorld) rows(t *testing.T, table, id string) int {
	t.Helper()
	var n int
	require.NoError(t, w.db.Get(&n, `SELECT COUNT(*) FROM `+table+` WHERE consumer_group = ? AND event_id = ?`, w.group, id))
	return n
}

// expired waits until the event's lease has expired on the database's clock.
func (w *leaseWorld) waitExpired(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, w.db.Get(&n, `SELECT COUNT(*) FROM event_lease WHERE consumer_group = ? AND event_id = ?
			AND lease_until <= UTC_TIMESTAMP(6)`, w.group, id))
		return n == 1
	}, 30*time.Second, 50*time.Millisecond, "the lease expires")
}

// requireLeaseHeld checks that o is a retry for a live lease: never acknowledged.
func requireLeaseHeld(t *testing.T, o consumer.Outcome, err error) {
	t.Helper()
	require.NoError(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind, "a live lease is retried: %s", o)
	assert.Equal(t, causelabel.LeaseHeld, o.Cause)
	assert.Contains(t, o.Reason, "lease held")
	assert.False(t, o.Kind.Acknowledges())
}

// F35: while the first delivery's handler runs (holding a live lease), other copies of the event — a
// redelivery and a re-send — are retried, never acknowledged, and never run the handler; the retry asks for
// the delay level that covers the lease. After the first commits, a copy is a duplicate.
func TestLease_SecondCopyWhileTheFirstHoldsALiveLeaseIsRetriedNeverRunConcurrently(t *testing.T) {
	w := newLeaseWorld(t)
	var calls, inFlight, maxInFlight atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	chain := w.chain(t, w.store, 30*time.Second, func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		if calls.Add(1) == 1 {
			close(entered)
			<-release // the payment call takes a while
		}
		return consumer.Processed(), nil
	})
	ev := testenv.Unique("ev")
	type result struct {
		o   consumer.Outcome
		err error
	}
	first := make(chan result, 1)
	go func() {
		o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
		first <- result{o, err}
	}()
	<-entered

	var wg sync.WaitGroup
	for i, msgID := range []string{ev + "-m1", ev + "-m2", ev + "-m1", ev + "-m3"} { // redeliveries and re-sends
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := chain.Handle(context.Background(), w.delivery(ev, msgID, i%2))
			requireLeaseHeld(t, o, err)
			assert.Equal(t, 4, o.DelayLevel, "the retry comes when the 30 s lease has run out (level 4 = 30 s)")
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, calls.Load(), "no copy ran the handler while the lease was held")
	assert.Equal(t, 1, w.rows(t, "event_lease", ev), "the lease is held")
	assert.Equal(t, 0, w.rows(t, "processed_event", ev))

	close(release)
	r := <-first
	require.NoError(t, r.err)
	assert.Equal(t, consumer.KindProcessed, r.o.Kind)
	assert.True(t, r.o.Committed)
	assert.Empty(t, r.o.Cause, "not a takeover")

	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m2", 1))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind, "the retried copy finds the event done")
	assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
	assert.EqualValues(t, 1, maxInFlight.Load(), "never two at once")
	assert.Equal(t, 1, w.ledger.Count(t, ev))
	assert.Equal(t, 0, w.rows(t, "event_lease", ev), "DONE deleted the lease with the commit")
}

// The lease holder of TestLease_HolderKilledMinus9… runs as a child process of the test binary (TestMain
// calls runLeaseHolder when leaseHolderEnv is set): it handles the event through the Lease chain, prints
// leaseHolderCalled when its handler has made the "payment call", and then never finishes.
const (
	leaseHolderEnv    = "RMQGUARD_TEST_LEASE_HOLDER"
	leaseHolderCalled = "CALLED"
)

// runLeaseHolder is the child's main: its environment names the group, the event, the lease and the ledger run.
func runLeaseHolder() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	db, err := sqlx.Open("mysql", testenv.MySQLDSN())
	if err != nil {
		fail(err)
	}
	store, err := dedup.NewStore(db)
	if err != nil {
		fail(err)
	}
	lease, err := time.ParseDuration(os.Getenv("LEASE"))
	if err != nil {
		fail(err)
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	if err != nil {
		fail(err)
	}
	h := dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+testenv.LedgerTable+` (run, event_id) VALUES (?, ?)`, os.Getenv("RUN"), d.EventID); err != nil {
			fail(err)
		}
		fmt.Println(leaseHolderCalled)
		time.Sleep(time.Hour) // killed here, the call made and its answer written but not committed
		return consumer.Processed(), nil
	})
	chain := testenv.Must(middleware.Chain(h, middleware.Classify(), eventID, testenv.Must(middleware.Lease(store, lease))))
	m := &primitive.MessageExt{MsgId: os.Getenv("EVENT") + "-m1", Message: primitive.Message{Topic: "PAYMENT", Body: []byte(`{}`)}}
	m.WithProperty("EVENT_ID", os.Getenv("EVENT"))
	_, err = chain.Handle(context.Background(), testenv.NewDelivery(os.Getenv("GROUP"), m))
	fail(fmt.Errorf("the chain returned: %v", err))
}

// F35: the first delivery's process dies (kill -9) after its handler made the call, before its commit: the
// server rolls back its transaction (no processed_event row, no business write) but its committed lease
// stays. A redelivery while the lease is live is retried; once it expired, of several concurrent
// redeliveries exactly one takes the lease over, is told it is a takeover (dedup.Takeover) and commits;
// the others are retried or duplicates, and the handler runs once more in all.
func TestLease_HolderKilledMinus9_AfterTheLeaseExpiresOneRedeliveryTakesOverAndIsTold(t *testing.T) {
	w := newLeaseWorld(t)
	const lease = 3 * time.Second
	ev := testenv.Unique("ev")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), leaseHolderEnv+"=1", "GROUP="+w.group, "EVENT="+ev, "LEASE="+lease.String(),
		"RUN="+w.run)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	called := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		called <- strings.TrimSpace(line)
	}()
	select {
	case line := <-called:
		require.Equal(t, leaseHolderCalled, line, "child stderr: %s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the lease holder never called; stderr: %s", stderr.String())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	var calls, takeovers atomic.Int32
	chain := w.chain(t, w.store, lease, func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		calls.Add(1)
		if dedup.Takeover(ctx) {
			takeovers.Add(1)
		}
		time.Sleep(200 * time.Millisecond) // the call, while the other redeliveries arrive
		return consumer.Processed(), nil
	})
	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 1))
	requireLeaseHeld(t, o, err)
	assert.Zero(t, calls.Load(), "the dead holder's lease is live: nobody calls")
	assert.Equal(t, 0, w.rows(t, "processed_event", ev), "the holder's transaction was rolled back with its process")
	assert.Equal(t, 0, w.ledger.Count(t, ev))

	w.waitExpired(t, ev)
	outcomes := make([]consumer.Outcome, 4)
	var wg sync.WaitGroup
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := chain.Handle(context.Background(), w.delivery(ev, fmt.Sprintf("%s-m%d", ev, 1+i%2), 2))
			require.NoError(t, err)
			outcomes[i] = o
		}()
	}
	wg.Wait()
	var processed int
	for _, o := range outcomes {
		switch o.Kind {
		case consumer.KindProcessed:
			processed++
			assert.Equal(t, causelabel.Takeover, o.Cause, "the processed outcome says it took over")
		case consumer.KindDuplicate:
		default:
			assert.Equal(t, causelabel.LeaseHeld, o.Cause, "a loser is retried for the taker's live lease: %s", o)
		}
	}
	assert.Equal(t, 1, processed, "one redelivery took over: %v", outcomes)
	assert.EqualValues(t, 1, calls.Load(), "the handler ran once after the crash")
	assert.EqualValues(t, 1, takeovers.Load(), "and was told it took over")
	assert.Equal(t, 1, w.ledger.Count(t, ev), "one business write committed")
	assert.Equal(t, 1, w.rows(t, "processed_event", ev))
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}

// F35: a handler that fails (its call did not take effect) releases its lease: its writes are rolled back
// with the claim, and the retry runs at once, as a new claim, not a takeover.
func TestLease_FailedHandlerReleasesItsLeaseSoTheRetryRunsAtOnce(t *testing.T) {
	w := newLeaseWorld(t)
	var calls atomic.Int32
	var tookOver []bool
	chain := w.chain(t, w.store, time.Minute, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		if calls.Add(1) == 1 {
			require.NoError(t, w.ledger.Append(ctx, tx, d.EventID)) // written, then the call is refused
			return consumer.Outcome{}, errors.New("payment API: card declined, try again")
		}
		return consumer.Processed(), nil
	})
	ev := testenv.Unique("ev")
	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.Error(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Empty(t, o.Cause, "a retry of the handler's own failure, not a held lease")
	assert.Equal(t, 0, w.rows(t, "event_lease", ev), "the failed handler released its lease")
	assert.Equal(t, 0, w.rows(t, "processed_event", ev), "rolled back: no DONE row")
	assert.Equal(t, 0, w.ledger.Count(t, ev), "rolled back: no business write")

	o, err = chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 1))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "the retry runs at once: %s", o)
	assert.Equal(t, []bool{false, false}, tookOver, "neither run is a takeover")
	assert.Equal(t, 1, w.ledger.Count(t, ev))
	assert.Equal(t, 1, w.rows(t, "processed_event", ev))
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}

// F35: DONE commits with the business writes. The handler succeeds, but its COMMIT never reaches the server
// (a CommitProxy drops it): neither the DONE row nor the business write exists, the message is not
// acknowledged (the store's failure: Unavailable, no attempt spent), and the lease stays, expired at once,
// so that the next delivery takes it over and is told — the first call may have happened.
func TestLease_DoneCommitsWithTheBusinessWrites_ALostCommitLeavesNeitherAndATakeover(t *testing.T) {
	w := newLeaseWorld(t)
	proxy := testenv.NewCommitProxy(t)
	proxied, err := dedup.NewStore(w.db, dedup.WithTxDSN(proxy.DSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxied.Close() })
	var tookOver []bool
	h := func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		return consumer.Processed(), nil
	}
	ev := testenv.Unique("ev")
	proxy.DropCommits()
	o, err := w.chain(t, proxied, time.Minute, h).Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.Error(t, err)
	assert.Equal(t, consumer.KindUnavailable, o.Kind, "a lost COMMIT is the store's failure: %s", o)
	assert.Equal(t, 0, w.rows(t, "processed_event", ev), "no DONE row")
	assert.Equal(t, 0, w.ledger.Count(t, ev), "no business write")
	w.waitExpired(t, ev)

	o, err = w.chain(t, w.store, time.Minute, h).Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, causelabel.Takeover, o.Cause)
	assert.Equal(t, []bool{false, true}, tookOver, "the run after the lost commit is told it took over")
	assert.Equal(t, 1, w.ledger.Count(t, ev), "the business write and")
	assert.Equal(t, 1, w.rows(t, "processed_event", ev), "the DONE row committed together")
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}

// An outage of the store while claiming the lease is the store's failure: consumer.Unavailable (the
// consumer pauses and runs the message again), never an attempt spent, and the handler does not run.
func TestLease_StoreOutageWhileClaimingIsUnavailableNotAnAttempt(t *testing.T) {
	w := newLeaseWorld(t)
	proxy := testenv.NewCommitProxy(t)
	db, err := sqlx.Open("mysql", proxy.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	var calls atomic.Int32
	chain := w.chain(t, store, time.Minute, func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		calls.Add(1)
		return consumer.Processed(), nil
	})
	proxy.Close() // the store is gone
	ev := testenv.Unique("ev")
	d := w.delivery(ev, ev+"-m1", 16) // even on the last delivery
	o, err := chain.Handle(context.Background(), d)
	require.Error(t, err)
	assert.Equal(t, consumer.KindUnavailable, o.Kind, "%s", o)
	assert.Zero(t, calls.Load())
}

// Chain treats Lease as Dedup: it needs EventID and Classify before it, Version goes after it, it serves a
// dedup.Handle handler, and a chain holds one of Dedup and Lease.
func TestLease_ChainCheckTreatsLeaseAsDedup(t *testing.T) {
	w := newLeaseWorld(t)
	txH := dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	})
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	version, err := middleware.Version(w.store, middleware.VersionConfig{AggregateType: "order"})
	require.NoError(t, err)
	lease := testenv.Must(middleware.Lease(w.store, time.Minute))

	assert.NoError(t, testenv.Refused(middleware.Chain(txH, middleware.Classify(), eventID, lease, version)))

	err = testenv.Refused(middleware.Chain(txH, middleware.Classify(), lease))
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "middleware.Lease (position 2) needs middleware.EventID before it")

	err = testenv.Refused(middleware.Chain(txH, middleware.Classify(), eventID, version, lease))
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "middleware.Version (position 3) needs middleware.Lease before it: move Lease before Version")

	err = testenv.Refused(middleware.Chain(txH, eventID, lease, middleware.Classify()))
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "middleware.Lease (position 2) needs middleware.Classify (position 3) before it")

	err = testenv.Refused(middleware.Chain(txH, middleware.Classify(), eventID, testenv.Must(middleware.Dedup(w.store)), lease))
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "middleware.Lease (position 4) repeats middleware.Dedup (position 3)")

	_, err = middleware.Lease(nil, time.Minute)
	assert.ErrorIs(t, err, middleware.ErrNilDependency)
	_, err = middleware.Lease(w.store, 0)
	assert.ErrorContains(t, err, "must be positive")
}

// A lease shorter than the handler (a misconfiguration: the lease must exceed the handler's deadline) is
// taken over while its holder still runs; the taker waits at the dedup claim for the holder's transaction,
// the holder finds its lease gone when it is about to commit (dedup.ErrClaimLost: a retry) and commits
// nothing, and the taker, told it took over, commits the event once.
func TestLease_LeaseShorterThanTheHandlerIsTakenOverAndTheFirstCommitsNothing(t *testing.T) {
	w := newLeaseWorld(t)
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	var tookOver []bool
	var mu sync.Mutex
	chain := w.chain(t, w.store, time.Second, func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		mu.Lock()
		tookOver = append(tookOver, dedup.Takeover(ctx))
		mu.Unlock()
		if calls.Add(1) == 1 {
			close(entered)
			<-release // slower than its lease
		}
		return consumer.Processed(), nil
	})
	ev := testenv.Unique("ev")
	type result struct {
		o   consumer.Outcome
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
		first <- result{o, err}
	}()
	<-entered
	w.waitExpired(t, ev)
	go func() {
		o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m2", 0))
		second <- result{o, err}
	}()
	time.Sleep(500 * time.Millisecond) // the taker has taken the lease and waits at the dedup claim
	assert.EqualValues(t, 1, calls.Load(), "the taker waits for the holder's transaction")
	close(release)

	r := <-first
	require.ErrorIs(t, r.err, dedup.ErrClaimLost, "the holder lost its lease")
	assert.Equal(t, consumer.KindRetry, r.o.Kind)
	assert.False(t, r.o.Committed)
	r = <-second
	require.NoError(t, r.err)
	assert.Equal(t, consumer.KindProcessed, r.o.Kind)
	assert.Equal(t, causelabel.Takeover, r.o.Cause)
	assert.Equal(t, []bool{false, true}, tookOver)
	assert.Equal(t, 1, w.ledger.Count(t, ev), "one commit")
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}

// BenchmarkLease_NewEventsOnMariaDB measures one new event through Classify → EventID → Dedup or Lease
// around a handler that writes nothing, on the test MariaDB, one message at a time: what lease mode's two
// short transactions (the lease claim, and the lease row's delete in the event's transaction) cost.
func BenchmarkLease_NewEventsOnMariaDB(b *testing.B) {
	db := testenv.MySQL(b)
	store, err := dedup.NewStore(db)
	require.NoError(b, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(b, err)
	h := dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	})
	for _, bc := range []struct {
		name string
		mw   middleware.Middleware
	}{{"Dedup", testenv.Must(middleware.Dedup(store))}, {"Lease", testenv.Must(middleware.Lease(store, time.Minute))}} {
		b.Run(bc.name, func(b *testing.B) {
			chain := testenv.Must(middleware.Chain(h, middleware.Classify(), eventID, bc.mw))
			group, run, i := testenv.Unique("cg"), testenv.Unique("ev"), 0
			for b.Loop() {
				i++
				m := &primitive.MessageExt{MsgId: "m", Message: primitive.Message{Topic: "PAYMENT"}}
				m.WithProperty("EVENT_ID", fmt.Sprintf("%s-%d", run, i))
				o, err := chain.Handle(context.Background(), testenv.NewDelivery(group, m))
				if err != nil || o.Kind != consumer.KindProcessed {
					b.Fatalf("outcome %v, err %v", o, err)
				}
			}
		})
	}
}
