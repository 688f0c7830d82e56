package dedup_test

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
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// Batch mode: attacks on the shared batch transaction through the consumer's real
// callback on the real test database.

// A panic in member 2's handler, with Recover outside Dedup as the recommended chain has it, must undo
// member 2's claim and writes like any other failure: the other members still commit, but member 2's
// processed_event row must not commit without its effect (the handler never finished), else its
// redelivery is a duplicate and the event is lost. Member 2 panics in both passes of the first delivery
// (the first pass, deferred to the batch's end, and the careful one).
func TestBatch_PanicInMemberRollsBackItsClaim(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	booms := 2
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-half"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e2 && booms > 0 {
			booms--
			panic("member 2 panics half-way")
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, "", f.status(t, e2), "the panicking member's claim must not commit")
	assert.Equal(t, 0, f.ledger.Count(t, e2+"-half"), "the panicking member's half-done write must not commit")
	assert.Equal(t, "SUCCESS", f.status(t, e1))
	assert.Equal(t, "SUCCESS", f.status(t, e3))

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// A handler's own SAVEPOINT may carry any name; one that happens to be the batch's name for the member's
// savepoint (rmqguard_sp<N>, documented and predictable) moves it past the member's claim, so that the
// member's ROLLBACK TO SAVEPOINT on failure keeps its claim and the writes before it, and COMMIT makes
// them durable: a failed message whose redelivery is a duplicate. The batch's savepoint names must not be
// a handler's to take. Member 2 fails in both passes of the first delivery (the first pass has no
// savepoint; the careful one has).
func TestBatch_HandlerSavepointOfTheSameNameKeepsAFailedClaim(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	fails := 2
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-before"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e2 && fails > 0 {
			fails--
			// The handler's own savepoint, for its own partial undo; its name is the member's.
			if _, err := tx.ExecContext(ctx, "SAVEPOINT rmqguard_sp2"); err != nil {
				return consumer.Outcome{}, err
			}
			return consumer.Outcome{}, errors.New("member 2 fails after its own savepoint")
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, "", f.status(t, e2), "the failed member's claim must not commit")
	assert.Equal(t, 0, f.ledger.Count(t, e2+"-before"), "the failed member's write must not commit")

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// killOwnConnection kills the connection tx runs on, from another connection of the same user (no root
// needed), as a MariaDB restart, a failover or a network cut would end it.
func (f *fixture) killOwnConnection(t *testing.T, ctx context.Context, tx *sqlx.Tx) {
	t.Helper()
	var id int64
	require.NoError(t, tx.GetContext(ctx, &id, "SELECT CONNECTION_ID()"))
	_, err := f.db.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // the server has closed the socket
}

// The store's connection is lost in the middle of a batch (member 2's statement fails with a broken
// connection: infrastructure, Unavailable). Alone, the message would wait at the store gate and be handled
// again without spending an attempt ("an attempt is spent only by the message's own failure"; README: a
// lost database connection becomes Unavailable on every delivery). In a batch the re-run member finds the
// transaction lost (ErrBatchLost, transient) and the whole callback is answered ConsumeRetryLater: every
// member spends an attempt, and on a member's last delivery the broker dead-letters it, for an outage.
func TestBatch_ConnectionLostMidBatchSpendsNoAttempt(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	kill := true
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == e2 && kill {
			kill = false
			f.killOwnConnection(t, ctx, tx)
		}
		return consumer.Processed(), nil // the ledger's write fails first on the killed connection
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...),
		"a lost store connection is not the messages' failure: no member may spend an attempt")
	for i := range msgs {
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 1)
		assert.True(t, dec[0].Outcome.Kind.Acknowledges(), "member %d: %s (%v)", i+1, dec[0].Outcome.Reason, dec[0].Err)
	}
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// The store's connection is lost between the last member and the batch's COMMIT (here: killed by the
// last member's handler after its write). Alone, a failed COMMIT is infrastructure (README: "a failed
// connect, BEGIN or COMMIT of the dedup transaction") and becomes Unavailable, spending no attempt. The
// batch's Finish error is turned into a plain consumer.Retry by the consumer: every member spends an attempt.
func TestBatch_CommitLostToTheStoreSpendsNoAttempt(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	kill := true
	cb := f.batchConsumer(t, false, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e3 && kill {
			kill = false
			f.killOwnConnection(t, ctx, tx) // after e3's write; no statement follows before COMMIT
		}
		return consumer.Processed(), nil
	})
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...),
		"a COMMIT lost to the store is not the messages' failure: no member may spend an attempt")
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// A member's handler reports the store unavailable (an infrastructure error) long enough that the waits
// at the store gate outlast the batch's own deadline (HandlerTimeout × members): the shared transaction is
// rolled back under the waiting batch. Alone, the message would be handled again when the store is back,
// spending no attempt; in the batch the re-run finds the transaction done and every member is retried,
// spending an attempt, for an outage.
func TestBatch_GateWaitPastTheBatchDeadlineSpendsNoAttempt(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	down := 3 // the gate's waits without a probe: 100 ms, 200 ms, 400 ms > the batch's 3 × 200 ms
	h := f.chain(t, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == e2 && down > 0 {
			down--
			return consumer.Outcome{}, retry.Infrastructure(errors.New("the store answers read-only (a failover)"))
		}
		return consumer.Processed(), nil
	}))
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}, BatchSize: 32,
		HandlerTimeout: 200 * time.Millisecond}
	cb := testenv.NewCallback(t, cfg, h)
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...),
		"an outage the batch waited out is not the messages' failure: no member may spend an attempt")
	assert.Zero(t, down)
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// The other side of the store's fault: a member whose own failure (not an infrastructure one) comes with
// a broken connection — a statement the server answers by closing it — is the member's failure: after the
// extra pass every lost batch gets and the pass alone that follows a second loss, that member is retried
// (ConsumeRetryLater) and the other commits, not handled again in a loop until OutageWait.
func TestBatch_MembersOwnFailureWithABrokenConnectionIsRetried(t *testing.T) {
	f := newFixture(t)
	e1, e2 := f.prefix+"-1", f.prefix+"-2"
	runs := 0
	cb := f.batchConsumer(t, false, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == e2 {
			runs++
			f.killOwnConnection(t, ctx, tx)
			return consumer.Outcome{}, errors.New("member 2's own failure")
		}
		return consumer.Processed(), f.ledger.Append(ctx, tx, d.EventID)
	})
	msgs := f.batchMsgs(t, e1, e2)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, 3, runs, "two batch passes and one alone, not a loop: the member's own failure is not an outage")
	assert.Equal(t, "SUCCESS", f.status(t, e1), "alone, the other member commits")
	assert.Equal(t, "", f.status(t, e2), "the failing member committed nothing")
}

// F7 in batch form: a member's handler blocked in a statement run without its context (tx.Exec) waiting
// for a row lock. Alone, that statement is cancelled at the message's deadline (README: "a statement the
// handler runs without its context (tx.Exec) is cancelled at the message's deadline all the same"). In a
// batch the statement falls back to the batch's context (HandlerTimeout × members), so the consumer's
// goroutine stays blocked up to members × HandlerTimeout (32 × HandlerTimeout with the bench's batch size,
// past the client's ConsumeTimeout for long timeouts): the member's own deadline must end it.
func TestBatch_StatementWithoutContextEndsAtTheMembersDeadline(t *testing.T) {
	f := newFixture(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "20"}
	oneConnStore(t, f, cfg.FormatDSN())
	locked := f.prefix + "-locked"
	_, err = f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, locked)
	require.NoError(t, err)
	holder, err := f.db.Beginx()
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, locked)
	require.NoError(t, err)

	const members, perMember = 8, 300 * time.Millisecond
	ids := make([]string, members)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", f.prefix, i+1)
	}
	var blocked time.Duration
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == ids[0] {
			start := time.Now()
			_, err := tx.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, locked)
			blocked = time.Since(start)
			if err != nil {
				return consumer.Outcome{}, err
			}
		}
		return consumer.Processed(), nil
	}), middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
	cb := testenv.NewCallback(t, consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, HandlerTimeout: perMember}, h)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, f.batchMsgs(t, ids...)...))
	assert.Less(t, blocked, members*perMember/2,
		"the blocked statement ended at the batch's deadline (%s), not the member's (%s)", members*perMember, perMember)
}
