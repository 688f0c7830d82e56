package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/pending"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// F35: a holder died with its lease (a lease claimed and never ended stands for kill -9 after the call).
// The delivery that takes it over is told so, but fails on its own (the other side cannot say yet whether
// the first call happened): its failure must not erase what it learnt. The lease stays, expired, so the
// next delivery is a takeover too and is told; only the processed one is counted as a takeover.
func TestLease_TakeoverThatFailsKeepsTheTakeoverForTheNextDelivery(t *testing.T) {
	w := newLeaseWorld(t)
	ev := testenv.Unique("ev")
	d := w.delivery(ev, ev+"-m1", 0)
	d.EventID = ev
	_, err := w.store.Protocol().(txproto.Leaser).ClaimLease(context.Background(), d, 200*time.Millisecond) // then killed
	require.NoError(t, err)
	w.waitExpired(t, ev)

	var tookOver []bool
	chain := w.chain(t, w.store, time.Minute, func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		if len(tookOver) == 1 {
			return consumer.Outcome{}, errors.New("payment API: charge lookup timed out, try again")
		}
		return consumer.Processed(), nil
	})
	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 1))
	require.Error(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind, "%s", o)
	assert.Equal(t, 1, w.rows(t, "event_lease", ev), "the lease row, trace of the dead holder's call, stays")

	o, err = chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 2))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "the retry runs at once: %s", o)
	assert.Equal(t, causelabel.Takeover, o.Cause, "counted once, on the processed delivery")
	assert.Equal(t, []bool{true, true}, tookOver, "both runs after the dead holder are told it may have called")
	assert.Equal(t, 1, w.ledger.Count(t, ev))
	assert.Equal(t, 1, w.rows(t, "processed_event", ev))
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}

// F35: consumer.New refuses, naming the fix, a Lease chain that could run a handler concurrently with a
// takeover (a lease not longer than HandlerTimeout) or that would dead-letter every message (BatchSize > 1);
// it accepts a lease longer than HandlerTimeout, also when an outer Chain completes the one holding Lease.
func TestLease_ConsumerNewRefusesALeaseNotLongerThanHandlerTimeoutAndBatches(t *testing.T) {
	w := newLeaseWorld(t)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	newConsumer := func(h consumer.Handler, timeout time.Duration, batch int) error {
		_, err := consumer.New(consumer.Config{NameServers: []string{"127.0.0.1:9876"}, Group: "cg",
			Subscriptions: []consumer.Subscription{{Topic: "PAYMENT"}}, HandlerTimeout: timeout, BatchSize: batch}, h,
			consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return idlePush{}, nil }))
		return err
	}
	chain := func(lease time.Duration) consumer.Handler {
		return testenv.Must(middleware.Chain(txPlain, middleware.Recover(nil), middleware.Classify(), eventID, testenv.Must(middleware.Lease(w.store, lease))))
	}

	err = newConsumer(chain(30*time.Second), 30*time.Second, 1)
	require.Error(t, err, "a lease as long as the handler's deadline")
	assert.Contains(t, err.Error(), "consumer.New: handler: middleware.Lease: the lease 30s is not longer than consumer.Config.HandlerTimeout 30s")
	assert.Contains(t, err.Error(), "make the lease longer than HandlerTimeout")
	err = newConsumer(chain(10*time.Second), 0, 1) // the default HandlerTimeout, 30 s
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HandlerTimeout 30s")

	err = newConsumer(chain(time.Minute), 30*time.Second, 4)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "middleware.Lease does not run in batches, and consumer.Config.BatchSize is 4: set BatchSize to 1")

	assert.NoError(t, newConsumer(chain(31*time.Second), 30*time.Second, 1))
	completed := testenv.Must(middleware.Chain(testenv.Must(middleware.Chain(txPlain, testenv.Must(middleware.Lease(w.store, 10*time.Second)))),
		middleware.Recover(nil), middleware.Classify(), eventID))
	assert.ErrorContains(t, newConsumer(completed, 30*time.Second, 1), "not longer than consumer.Config.HandlerTimeout",
		"an outer Chain completing the inner one keeps the check")
	assert.NoError(t, newConsumer(completed, 5*time.Second, 1))
}

// F35, F7: a deadline inside Lease (Deadline after it, shorter than the consumer's) ends a run whose call
// may have happened: the handler made its call and was then stopped by its context. The lease's context is
// still live, but the run did not fail on its own: the lease is expired, not released, so the next
// delivery takes over and is told.
func TestLease_RunEndedByAnInnerDeadlineIsATakeoverNotANewClaim(t *testing.T) {
	w := newLeaseWorld(t)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	var tookOver []bool
	h := dedup.Handle(w.ledger.Handler(func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		if len(tookOver) == 1 {
			<-ctx.Done() // the call made, its answer slower than the deadline
			return consumer.Outcome{}, ctx.Err()
		}
		return consumer.Processed(), nil
	}))
	chain := testenv.Must(middleware.Chain(h, middleware.Recover(nil), middleware.Classify(), eventID,
		testenv.Must(middleware.Lease(w.store, time.Minute)), middleware.Deadline(200*time.Millisecond)))
	require.NoError(t, pending.Refused(chain))
	ev := testenv.Unique("ev")
	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.Error(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind, "%s", o)
	assert.Equal(t, causelabel.Timeout, o.Cause)
	assert.Equal(t, 1, w.rows(t, "event_lease", ev), "the lease stays, expired")

	o, err = chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 1))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "the retry runs at once: %s", o)
	assert.Equal(t, causelabel.Takeover, o.Cause)
	assert.Equal(t, []bool{false, true}, tookOver, "the run after the deadline is told it took over")
	assert.Equal(t, 1, w.ledger.Count(t, ev))
}

// F35: Timeout inside Lease would answer at its deadline while the handler (one that ignores its context,
// what Timeout is for) still runs, and Lease would end the lease then: the next delivery would run the
// handler at the same time. Chain refuses that order, naming the fix; Timeout before Lease is accepted
// (Lease keeps its lease until the handler returns).
func TestLease_ChainRefusesTimeoutInsideLease(t *testing.T) {
	w := newLeaseWorld(t)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	err = testenv.Refused(middleware.Chain(txPlain, middleware.Recover(nil), middleware.Classify(), eventID,
		testenv.Must(middleware.Lease(w.store, time.Minute)), middleware.Timeout(time.Second)))
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "middleware.Timeout (position 5) must not be inside middleware.Lease (position 4)")
	assert.Contains(t, err.Error(), "move Timeout before Lease, or use Deadline")

	assert.NoError(t, testenv.Refused(middleware.Chain(txPlain, middleware.Recover(nil), middleware.Classify(), eventID,
		middleware.Timeout(time.Second), testenv.Must(middleware.Lease(w.store, time.Minute)))))
	assert.NoError(t, testenv.Refused(middleware.Chain(txPlain, middleware.Recover(nil), middleware.Classify(), eventID,
		testenv.Must(middleware.Lease(w.store, time.Minute)), middleware.Deadline(time.Second))))
}

// F35, F19: a handler whose store went away after its call (its write fails with a lost connection, an
// infrastructure error: no attempt is spent) did not fail on its own: the call may have happened, so its
// lease is expired, not released, and the run after the outage is told it takes over.
func TestLease_HandlerFailingOnAnOutageAfterItsCallIsATakeover(t *testing.T) {
	w := newLeaseWorld(t)
	var tookOver []bool
	chain := w.chain(t, w.store, time.Minute, func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		if len(tookOver) == 1 {
			return consumer.Outcome{}, fmt.Errorf("write the charge ID: %w", mysql.ErrInvalidConn)
		}
		return consumer.Processed(), nil
	})
	ev := testenv.Unique("ev")
	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.Error(t, err)
	assert.Equal(t, consumer.KindUnavailable, o.Kind, "an outage: %s", o)
	assert.Equal(t, 1, w.rows(t, "event_lease", ev), "the lease stays, expired")

	o, err = chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.NoError(t, err)
	assert.Equal(t, causelabel.Takeover, o.Cause, "%s", o)
	assert.Equal(t, []bool{false, true}, tookOver)
}

// F35, F13: the handler's transaction was rolled back underneath it (a deadlock it swallowed: MySQL rolls
// back the whole transaction, and the statements after it autocommit) after its call. Nothing may commit
// the lease row's delete without the DONE row: the run is a retry (dedup.ErrClaimLost), its lease stays,
// expired, and the next delivery is told it takes over.
func TestLease_TransactionRolledBackUnderTheHandlerKeepsTheLease(t *testing.T) {
	w := newLeaseWorld(t)
	var tookOver []bool
	chain := w.chain(t, w.store, time.Minute, func(ctx context.Context, tx *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		if len(tookOver) == 1 {
			_, err := tx.ExecContext(ctx, "ROLLBACK") // stands for a 1213 the handler swallowed
			require.NoError(t, err)
		}
		return consumer.Processed(), nil
	})
	ev := testenv.Unique("ev")
	o, err := chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 0))
	require.ErrorIs(t, err, dedup.ErrClaimLost)
	assert.Equal(t, consumer.KindRetry, o.Kind, "%s", o)
	assert.Equal(t, 0, w.rows(t, "processed_event", ev))
	assert.Equal(t, 1, w.rows(t, "event_lease", ev), "the lease row is not deleted without the DONE row")

	o, err = chain.Handle(context.Background(), w.delivery(ev, ev+"-m1", 1))
	require.NoError(t, err)
	assert.Equal(t, causelabel.Takeover, o.Cause, "%s", o)
	assert.Equal(t, []bool{false, true}, tookOver)
}

// F35, F39: the COMMIT of a lease claim reaches the server, but its answer is lost. The claim is decided by
// the lease row it left (read back by its token): the lease is this delivery's, the handler may run. Before,
// the delivery was paused as Unavailable and its rerun found its own lease live: retried (an attempt spent)
// for the lease's length, then run as a takeover of itself.
func TestLease_ClaimWhoseCommitAnswerIsLostIsDecidedByTheLeaseRow(t *testing.T) {
	w := newLeaseWorld(t)
	proxy := testenv.NewCommitProxy(t)
	db, err := sqlx.Open("mysql", proxy.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	ev := testenv.Unique("ev")
	d := w.delivery(ev, ev+"-m1", 0)
	d.EventID = ev

	proxy.LoseCommitAnswers(0)
	lease, err := store.Protocol().(txproto.Leaser).ClaimLease(context.Background(), d, time.Minute)
	require.NoError(t, err, "committed: the lease is this delivery's")
	assert.Equal(t, 1, proxy.Commits())
	assert.False(t, dedup.Takeover(txproto.WithLease(context.Background(), lease)))
	proxy.DelayCommitAnswers(0)

	other := w.delivery(ev, ev+"-m2", 0)
	other.EventID = ev
	_, err = w.store.Protocol().(txproto.Leaser).ClaimLease(context.Background(), other, time.Minute)
	assert.ErrorIs(t, err, dedup.ErrLeaseHeld, "the lease is held")
	require.NoError(t, lease.Release(context.Background()), "and it is this delivery's to release")
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))

	proxy.DropCommits() // the COMMIT never reaches the server: no lease, the store's failure
	_, err = store.Protocol().(txproto.Leaser).ClaimLease(context.Background(), d, time.Minute)
	require.Error(t, err)
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err))
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}
