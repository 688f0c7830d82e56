package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
)

// With consumer.Config.BatchSize > 1 the members of one callback share one dedup
// transaction, a SAVEPOINT per member and one COMMIT after the last. These tests run the consumer's real
// callback (testenv.Callback: only the pulling is the test's) on the real test database.

// batchConsumer is f's chain, with h as the business handler, behind a consumer with BatchSize 32.
func (f *fixture) batchConsumer(t *testing.T, orderly bool, h dedup.TxHandler) *testenv.Callback {
	t.Helper()
	if orderly {
		// Orderly consumption runs one handler per queue it holds, which no Config bounds: consumer.New
		// accepts a store on the application's pool (RMQGUARD_TEST_DEDUP_TXPOOL=0) only unbounded (F40).
		f.db.SetMaxOpenConns(0)
	}
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, Orderly: orderly, HandlerTimeout: 5 * time.Second}
	return testenv.NewCallback(t, cfg, f.chain(t, h))
}

// batchMsgs returns one message per event ID, each with its own order number.
func (f *fixture) batchMsgs(t *testing.T, ids ...string) []*primitive.MessageExt {
	msgs := make([]*primitive.MessageExt, len(ids))
	for i, id := range ids {
		msgs[i] = f.orderMsg(t, id, id)
	}
	return msgs
}

// status returns the result_status of the event's processed_event row, "" when there is none.
func (f *fixture) status(t *testing.T, eventID string) string {
	t.Helper()
	var s []string
	require.NoError(t, f.db.Select(&s, `SELECT result_status FROM processed_event WHERE consumer_group = ? AND event_id = ?`, f.group, eventID))
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Rules 1 and 2: a failing member is rolled back to its savepoint (its claim and its writes); the others
// commit together. The batch is retried as a whole, and on redelivery the committed members are duplicates.
func TestBatch_FailingMemberRolledBackOthersCommitTogether(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	fail := true
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-written"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e2 && fail {
			return consumer.Outcome{}, errors.New("member 2 fails")
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, "SUCCESS", f.status(t, e1))
	assert.Equal(t, "", f.status(t, e2), "member 2's claim was rolled back to its savepoint")
	assert.Equal(t, "SUCCESS", f.status(t, e3))
	assert.Equal(t, 0, f.ledger.Count(t, e2+"-written"), "member 2's own write was rolled back")
	assert.Equal(t, 1, f.ledger.Count(t, e1+"-written"))
	assert.Equal(t, 1, f.ledger.Count(t, e3+"-written"))
	require.Len(t, cb.Decisions(msgs[0].MsgId), 1)
	assert.True(t, cb.Decisions(msgs[0].MsgId)[0].BatchRetried)

	fail = false
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for i, want := range []consumer.Kind{consumer.KindDuplicate, consumer.KindProcessed, consumer.KindDuplicate} {
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 2)
		assert.Equal(t, want, dec[1].Outcome.Kind, "member %d on redelivery", i+1)
	}
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id+"-written"), "event %s took effect once", id)
		assert.Equal(t, 1, f.ledger.Count(t, id))
	}
}

// Rule 3, F15 in batch form: a deadlock inside member 2's handler rolls the whole batch transaction back
// server-side. Whether the handler returns the 1213 (ROLLBACK TO SAVEPOINT then fails with 1305) or
// swallows it and goes on (the claim count before COMMIT finds rows missing), no effect of that pass
// commits and no after-commit hook runs. Lost in the careful pass and again in the one after it, the
// batch is handled member by member: when member 2 deadlocks alone too, it alone is decided a retry (with
// the error, never a dead letter), members 1 and 3 commit once; on redelivery member 2 takes effect once.
func TestF15_Batch_DeadlockInEveryPassRetriesOnlyTheMemberThatDeadlocks(t *testing.T) {
	for _, swallow := range []bool{false, true} {
		name := map[bool]string{false: "handler returns the deadlock", true: "handler swallows the deadlock"}[swallow]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			a, b := f.prefix+"-lock-a", f.prefix+"-lock-b"
			for _, o := range []string{a, b} {
				_, err := f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
					VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, o)
				require.NoError(t, err)
			}
			e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
			deadlockPasses, deadlocks := 3, 0 // the first delivery deadlocks in its careful pass, the next, and alone
			var hooksMu sync.Mutex
			hooks := 0
			cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				require.NoError(t, dedup.AfterCommit(ctx, func(context.Context) { hooksMu.Lock(); hooks++; hooksMu.Unlock() }))
				if d.EventID == e2 {
					if _, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, a); err != nil {
						return consumer.Outcome{}, err
					}
					if deadlockPasses > 0 {
						deadlockPasses--
						defer f.deadlockWith(a, b)()
					}
					_, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, b)
					var me *mysql.MySQLError
					if errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock {
						deadlocks++
						if !swallow {
							return consumer.Outcome{}, err
						}
					}
				}
				return consumer.Processed(), nil
			}))
			msgs := f.batchMsgs(t, e1, e2, e3)
			assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
			require.Equal(t, 3, deadlocks, "the scenario produced its deadlock in the two batch passes and alone")
			for i, id := range []string{e1, e2, e3} {
				dec := cb.Decisions(msgs[i].MsgId)
				require.Len(t, dec, 1)
				if i != 1 {
					assert.Equal(t, "SUCCESS", f.status(t, id), "member %d committed", i+1)
					assert.Equal(t, 1, f.ledger.Count(t, id), "member %d took effect once", i+1)
					assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "member %d decided processed", i+1)
					continue
				}
				assert.Equal(t, "", f.status(t, id), "no row committed for the member that deadlocked")
				assert.Equal(t, 0, f.ledger.Count(t, id), "no effect committed for the member that deadlocked")
				assert.Equal(t, consumer.KindRetry, dec[0].Outcome.Kind, "the member that deadlocked is decided a retry")
				require.Error(t, dec[0].Err, "with its error")
				if swallow {
					assert.ErrorIs(t, dec[0].Err, dedup.ErrClaimLost)
				} else {
					var me *mysql.MySQLError
					require.ErrorAs(t, dec[0].Err, &me)
					assert.EqualValues(t, mysqlerr.ErLockDeadlock, me.Number)
				}
			}
			assert.Equal(t, 2, hooks, "the hooks of members 1 and 3 ran once, after their own COMMITs")

			assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
			for _, id := range []string{e1, e2, e3} {
				assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
			}
			assert.Equal(t, 3, hooks, "each member's hook ran once")
		})
	}
}

// A batch lost to a deadlock is not its members' own failure: the consumer handles the callback once more in a
// fresh transaction before answering, so when the deadlock does not come back every member is applied once
// and acknowledged on the first delivery, no attempt spent (the client's ReconsumeTimes stays).
func TestF15_Batch_LostBatchIsHandledOnceMoreBeforeAnyRetry(t *testing.T) {
	f := newFixture(t)
	a, b := f.prefix+"-lock-a", f.prefix+"-lock-b"
	for _, o := range []string{a, b} {
		_, err := f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
			VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, o)
		require.NoError(t, err)
	}
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	first, deadlocks, runs := true, 0, 0
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		runs++
		if d.EventID == e2 {
			if _, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, a); err != nil {
				return consumer.Outcome{}, err
			}
			if first {
				first = false
				defer f.deadlockWith(a, b)()
			}
			_, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, b)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock {
				deadlocks++
				return consumer.Outcome{}, err
			}
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	require.Equal(t, 1, deadlocks, "the scenario produced its deadlock")
	assert.Equal(t, 3+2, runs, "pass 1 ran members 1 and 2 (3 was not handled on the lost transaction), pass 2 all three")
	for i, id := range []string{e1, e2, e3} {
		assert.Equal(t, "SUCCESS", f.status(t, id))
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 1, "one decision, from the second pass")
		assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind)
		assert.NoError(t, dec[0].Err)
	}
}

// Rule 5: a stale member is rolled back to its savepoint (its writes dropped) and its STALE row is inserted
// inside the batch transaction, committed with the others; its next delivery is a duplicate.
func TestBatch_StaleMemberRecordedInsideTheBatch(t *testing.T) {
	f := newFixture(t)
	e1, e2 := f.prefix+"-1", f.prefix+"-2"
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-written"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e2 {
			return consumer.Stale("version 1 is not above 3"), nil
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, dedupsql.ResultSuccess, f.status(t, e1))
	assert.Equal(t, dedupsql.ResultStale, f.status(t, e2))
	assert.Equal(t, 0, f.ledger.Count(t, e2+"-written"), "the stale member's writes were rolled back")
	assert.Equal(t, consumer.KindStale, cb.Decisions(msgs[1].MsgId)[0].Outcome.Kind)

	again := f.orderMsg(t, e2, e2)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, again))
	assert.Equal(t, consumer.KindDuplicate, cb.Decisions(again.MsgId)[0].Outcome.Kind)
}

// Rule 6: after-commit hooks of a member rolled back to its savepoint never run; the kept members' run
// once, after the batch COMMIT (the row is visible to another connection when they run).
func TestBatch_AfterCommitHooksOfRolledBackMemberNeverRun(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	var mu sync.Mutex
	ran := map[string]int{}
	visible := map[string]bool{}
	cb := f.batchConsumer(t, false, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		id := d.EventID
		require.NoError(t, dedup.AfterCommit(ctx, func(ctx context.Context) {
			mu.Lock()
			defer mu.Unlock()
			ran[id]++
			visible[id] = f.dedupRows(t, id) == 1
		}))
		if id == e2 {
			return consumer.Retry(0, "member 2 asks for a retry"), nil
		}
		return consumer.Processed(), nil
	})
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, f.batchMsgs(t, e1, e2, e3)...))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{e1: 1, e3: 1}, ran)
	assert.Equal(t, map[string]bool{e1: true, e3: true}, visible, "hooks ran after the COMMIT")
}

// proxiedStore makes f's store one on its own pool behind a statement-recording proxy (the application's
// pool, for the causes of duplicates, stays direct) and returns the proxy.
func (f *fixture) proxiedStore(t *testing.T) *testenv.CommitProxy {
	proxy := testenv.NewCommitProxy(t)
	oneConnStore(t, f, proxy.DSN())
	return proxy
}

// statementKinds returns the first words of stmts ("INSERT IGNORE" and "INSERT INTO <table>" told apart).
func statementKinds(stmts []string) []string {
	kinds := make([]string, len(stmts))
	for i, st := range stmts {
		f := strings.Fields(st)
		switch {
		case len(f) >= 3 && f[0] == "INSERT":
			kinds[i] = strings.Join(f[:3], " ")
		case len(f) > 0:
			kinds[i] = f[0]
		}
	}
	return kinds
}

// A happy batch of n members sends BEGIN, one claim statement for all n, the handlers'
// writes and COMMIT, recorded on the wire: no SAVEPOINT, no claim per member, no read-back (the careful
// pass, until the first pass the only one, sent a SAVEPOINT and a claim per member: 3n + 2 here).
func TestBatch_HappyBatchSendsOneClaimAndNoSavepoint(t *testing.T) {
	f := newFixture(t)
	proxy := f.proxiedStore(t)
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", f.prefix, i+1)
	}
	cb := f.batchConsumer(t, false, insertOrder)
	proxy.RecordStatements()
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, f.batchMsgs(t, ids...)...))
	want := []string{"START", "INSERT IGNORE INTO"}
	for range n {
		want = append(want, "INSERT INTO DEDUP_TEST_ORDER")
	}
	want = append(want, "COMMIT")
	assert.Equal(t, want, statementKinds(proxy.Statements()))
	for _, id := range ids {
		assert.Equal(t, 1, f.dedupRows(t, id))
		assert.Equal(t, 1, f.orderRows(t, id))
	}
}

// Duplicates in a batch — events committed earlier, one redelivered, and an event twice
// inside the batch — are told apart by one read of the batch's own claims after the one claim statement,
// never by a failed statement each; they are answered Duplicate with their cause (read after the COMMIT, in
// one SELECT on the application's pool) and their handlers do not run.
func TestBatch_DuplicatesToldApartWithoutAFailedStatementEach(t *testing.T) {
	f := newFixture(t)
	proxy := f.proxiedStore(t)
	done := []string{f.prefix + "-d1", f.prefix + "-d2"}
	first, last := f.prefix+"-first", f.prefix+"-last"
	var mu sync.Mutex
	ran := map[string]int{}
	cb := f.batchConsumer(t, false, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		mu.Lock()
		ran[d.EventID]++
		mu.Unlock()
		return insertOrder(ctx, tx, d)
	})
	earlier := f.batchMsgs(t, done...)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, earlier...))

	msgs := []*primitive.MessageExt{f.orderMsg(t, first, first), earlier[0], f.orderMsg(t, done[1], done[1]),
		f.orderMsg(t, first, first), f.orderMsg(t, last, last)}
	proxy.RecordStatements()
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, []string{"START", "INSERT IGNORE INTO", "SELECT", "INSERT INTO DEDUP_TEST_ORDER", "INSERT INTO DEDUP_TEST_ORDER", "COMMIT"},
		statementKinds(proxy.Statements()))
	for i, want := range []struct {
		kind  consumer.Kind
		cause string
	}{{consumer.KindProcessed, ""}, {consumer.KindDuplicate, causelabel.Redelivery}, {consumer.KindDuplicate, causelabel.Resend},
		{consumer.KindDuplicate, causelabel.Resend}, {consumer.KindProcessed, ""}} {
		dec := cb.Decisions(msgs[i].MsgId)
		require.NotEmpty(t, dec, "member %d", i+1)
		last := dec[len(dec)-1] // member 2 was delivered before: its first decision is that delivery's
		assert.Equal(t, want.kind, last.Outcome.Kind, "member %d", i+1)
		assert.Equal(t, want.cause, last.Outcome.Cause, "member %d", i+1)
		assert.Equal(t, last.Outcome.Kind, last.Chain.Kind, "member %d: the chain's outcome is what Finish decided", i+1)
	}
	assert.Equal(t, map[string]int{done[0]: 1, done[1]: 1, first: 1, last: 1}, ran, "the duplicates' handlers did not run")
	for _, id := range []string{first, last, done[0], done[1]} {
		assert.Equal(t, 1, f.orderRows(t, id), "event %s took effect once", id)
	}
}

// A batch whose members are all duplicates (the redelivery of a batch that committed)
// costs its one claim statement, which inserts nothing, and no read of its rows; every member is a
// duplicate caused by redelivery, and no handler runs.
func TestBatch_AllDuplicatesCostOneClaimAndNoRead(t *testing.T) {
	f := newFixture(t)
	proxy := f.proxiedStore(t)
	var runs atomic.Int32
	cb := f.batchConsumer(t, false, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		runs.Add(1)
		return insertOrder(ctx, tx, d)
	})
	msgs := f.batchMsgs(t, f.prefix+"-1", f.prefix+"-2", f.prefix+"-3")
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	proxy.RecordStatements()
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, []string{"START", "INSERT IGNORE INTO", "ROLLBACK"}, statementKinds(proxy.Statements()))
	assert.Equal(t, int32(3), runs.Load(), "no handler ran on the redelivery")
	for _, m := range msgs {
		dec := cb.Decisions(m.MsgId)
		require.Len(t, dec, 2)
		assert.Equal(t, consumer.KindDuplicate, dec[1].Outcome.Kind)
		assert.Equal(t, causelabel.Redelivery, dec[1].Outcome.Cause)
	}
}

// Rule 7: the batch transaction lives on the batch's own context (HandlerTimeout × members), not on a
// member's: members that together run longer than one HandlerTimeout still commit together.
func TestBatch_TransactionOutlivesEachMembersContext(t *testing.T) {
	f := newFixture(t)
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, HandlerTimeout: 300 * time.Millisecond}
	cb := testenv.NewCallback(t, cfg, f.chain(t, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		time.Sleep(150 * time.Millisecond)
		return consumer.Processed(), nil
	})))
	ids := []string{f.prefix + "-1", f.prefix + "-2", f.prefix + "-3"}
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, f.batchMsgs(t, ids...)...))
	for _, id := range ids {
		assert.Equal(t, 1, f.ledger.Count(t, id))
	}
	assert.Zero(t, f.store.Protocol().(txproto.Pooled).TxStats().InUse, "the connection went back to the pool")
}

// Rule 8: in orderly mode the members behind one that is not acknowledged are held back (not handled) and
// have no claim in the transaction; the members before it commit before the queue is suspended. The first
// pass runs members 1 and 2 in message order and stops at 2, the careful pass runs them again.
func TestBatch_OrderlyHeldBackMembersHaveNoClaim(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3, e4 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3", f.prefix+"-4"
	handled := map[string]int{}
	fail := true
	cb := f.batchConsumer(t, true, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		handled[d.EventID]++
		if d.EventID == e2 && fail {
			return consumer.Retry(0, "member 2 not yet"), nil
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3, e4)
	assert.Equal(t, rmq.SuspendCurrentQueueAMoment, cb.Deliver(t, true, msgs...))
	assert.Equal(t, map[string]int{e1: 2, e2: 2}, handled, "members 3 and 4 were held back, in both passes")
	assert.Equal(t, "SUCCESS", f.status(t, e1), "member 1 committed before the suspension")
	for _, id := range []string{e2, e3, e4} {
		assert.Equal(t, "", f.status(t, id), "no claim for %s", id)
	}
	fail = false
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, true, msgs...))
	assert.Equal(t, consumer.KindDuplicate, cb.Decisions(msgs[0].MsgId)[1].Outcome.Kind)
	for _, id := range []string{e1, e2, e3, e4} {
		assert.Equal(t, 1, f.ledger.Count(t, id))
	}
}

// Rule 4 at the store: on the store's own pool (WithTxDSN) a duplicate claim (1062) and a successful
// ROLLBACK TO SAVEPOINT of the store's own leave no doubt (ConfirmBatch then costs no SELECT); any other
// failed statement does, and a handler's own ROLLBACK TO SAVEPOINT does too.
func TestBatch_DuplicateAndOwnRollbackToAreNoDoubt(t *testing.T) {
	f := newFixture(t)
	store, err := dedup.NewStore(f.db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	ctx := context.Background()
	done := testenv.NewDelivery(f.group, f.orderMsg(t, f.prefix+"-done", f.prefix+"-done"))
	done.EventID = f.prefix + "-done"
	txn, err := store.Protocol().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Protocol().Claim(ctx, txn, done))
	require.NoError(t, txn.Commit())

	txn, err = store.Protocol().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txn.Rollback() }()
	first, err := txn.Savepoint(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, store.Protocol().Claim(ctx, txn, done), dedup.ErrDuplicate)
	assert.False(t, dedup.DoubtSinceBegin(txn), "a 1062 is a statement-level rollback only")

	failing := testenv.NewDelivery(f.group, f.orderMsg(t, f.prefix+"-failing", f.prefix+"-failing"))
	failing.EventID = f.prefix + "-failing"
	sp, err := txn.Savepoint(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Protocol().Claim(ctx, txn, failing))
	require.NoError(t, txn.RollbackTo(ctx, sp))
	assert.False(t, dedup.DoubtSinceBegin(txn), "the store's own rollback to a savepoint keeps the transaction")
	require.NoError(t, store.Protocol().ConfirmBatch(ctx, txn, []*consumer.Delivery{failing}), "no doubt: no SELECT, nothing to find")

	_, err = txn.SQLTx().ExecContext(ctx, `ROLLBACK TO SAVEPOINT `+first.Name)
	require.NoError(t, err)
	assert.True(t, dedup.DoubtSinceBegin(txn), "a handler's own ROLLBACK TO may undo another member's claim")
	require.ErrorIs(t, store.Protocol().ConfirmBatch(ctx, txn, []*consumer.Delivery{failing}), dedup.ErrClaimLost,
		"with a doubt the kept rows are counted")
}

// Rule 7 with middleware.Timeout outside Dedup: member 1's handler ignores its context and is abandoned at
// its deadline while it still runs, then writes late on the shared transaction. Its claim is still in the
// transaction and its late write would fall into the next member's savepoint, so the next member finds it
// active and the batch transaction is lost: nothing commits, not member 1's claim without its effect. Lost
// in both careful passes, the members are handled alone: member 1, abandoned again, is retried alone (its
// late write finds its own transaction finished); members 2 and 3 commit. On redelivery member 1 takes
// effect once.
func TestBatch_AbandonedMemberLosesTheBatchAndIsRetriedAlone(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	var slowPasses atomic.Int32 // abandoned in the two batch passes of the first delivery and alone
	slowPasses.Store(3)
	lateWrite := make(chan error, 3)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == e1 && slowPasses.Add(-1) >= 0 {
			time.Sleep(600 * time.Millisecond) // ignores its context
			lateWrite <- f.ledger.Append(context.Background(), tx, e1+"-late")
		}
		return consumer.Processed(), nil
	})), middleware.Classify(), eventID, middleware.Timeout(200*time.Millisecond), testenv.Must(middleware.Dedup(f.store))))
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}, BatchSize: 32, HandlerTimeout: 5 * time.Second}
	cb := testenv.NewCallback(t, cfg, h)
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	for pass := 1; pass <= 3; pass++ {
		assert.Error(t, <-lateWrite, "the late write of pass %d finds its transaction finished", pass)
	}
	assert.Equal(t, "", f.status(t, e1), "no row committed for the abandoned member")
	assert.Equal(t, 0, f.ledger.Count(t, e1))
	assert.Equal(t, consumer.KindRetry, cb.Decisions(msgs[0].MsgId)[0].Outcome.Kind)
	for i, id := range []string{e2, e3} {
		assert.Equal(t, "SUCCESS", f.status(t, id), "member %d committed alone", i+2)
		assert.Equal(t, 1, f.ledger.Count(t, id))
		assert.Equal(t, consumer.KindProcessed, cb.Decisions(msgs[i+1].MsgId)[0].Outcome.Kind)
	}
	assert.Equal(t, 0, f.ledger.Count(t, e1+"-late"))

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for _, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, f.ledger.Count(t, id), "event %s took effect once", id)
	}
}

// A member whose handler ignores its context and returns Processed after the member's deadline (under the
// inline Deadline, which does not abandon it) is not kept: alone, its transaction would have been rolled
// back at the deadline; in a batch its claim and writes are rolled back to its savepoint, the others commit.
// It is slow in both passes of the first delivery (the first pass, deferred to the batch's end, and the
// careful one).
func TestBatch_MemberReturningAfterItsDeadlineIsNotKept(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	slow := 2
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := f.ledger.Append(ctx, tx, d.EventID+"-written"); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == e1 && slow > 0 {
			slow--
			time.Sleep(300 * time.Millisecond) // ignores its context (the batch has 3 × 200 ms)
		}
		return consumer.Processed(), nil // no statement after the deadline: only Dedup can tell
	}), middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}, BatchSize: 32, HandlerTimeout: 200 * time.Millisecond}
	cb := testenv.NewCallback(t, cfg, h)
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, "", f.status(t, e1), "the late member's claim was rolled back")
	assert.Equal(t, 0, f.ledger.Count(t, e1+"-written"), "the late member's write was rolled back")
	assert.Equal(t, causelabel.Timeout, cb.Decisions(msgs[0].MsgId)[0].Outcome.Cause)
	assert.Equal(t, "SUCCESS", f.status(t, e2), "the other members committed")
	assert.Equal(t, "SUCCESS", f.status(t, e3), "the other members committed")

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, 1, f.ledger.Count(t, e1+"-written"))
	assert.Equal(t, 1, f.ledger.Count(t, e2+"-written"))
	assert.Equal(t, 1, f.ledger.Count(t, e3+"-written"))
}
