package dedup_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// How a batch's first pass (its members deferred to the batch's Finish) fails: whose failure it is, what
// the consumer answers, and what is reported.

// runCounter counts the runs of each event's handler.
type runCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

// add counts a run of eventID and returns its number (1 for the first).
func (r *runCounter) add(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]int{}
	}
	r.runs[eventID]++
	return r.runs[eventID]
}

func (r *runCounter) of(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[eventID]
}

// A first pass whose COMMIT never reaches the server (the store's connection breaks) is the store's
// failure, not the members': the consumer waits at the store gate and handles the callback again, and
// every member is Processed on this delivery, once, spending no attempt.
func TestBatch_FirstPassCommitLostToTheStoreIsHandledAgainWithoutSpendingAnAttempt(t *testing.T) {
	f := newFixture(t)
	proxy := f.proxiedStore(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	var runs runCounter
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if runs.add(d.EventID) == 1 {
			proxy.DropCommits() // the first pass's COMMIT
		} else {
			proxy.DelayCommitAnswers(0) // the next pass's goes through
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for i, id := range []string{e1, e2, e3} {
		assert.Equal(t, 2, runs.of(id), "%s: the first pass, then the pass after the gate", id)
		assert.Equal(t, 1, f.ledger.Count(t, id), "%s took effect once", id)
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 1, id)
		assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s: %s (%v)", id, dec[0].Outcome, dec[0].Err)
		assert.NoError(t, dec[0].Err, id)
		assert.False(t, dec[0].BatchRetried, id)
	}
}

// F15 after a first pass: member 2 fails on its own in the first pass (a retry), and the careful pass that
// follows loses its transaction to a deadlock in member 3. That loss is not the members' own failure: the
// consumer handles the callback once more, carefully, before answering; members 1 and 3 commit once and
// are Processed, member 2 alone is retried for its own reason, and no decision carries the loss.
func TestF15_Batch_CarefulPassLostAfterAFirstPassFailureIsHandledOnceMore(t *testing.T) {
	f := newFixture(t)
	a, b := f.prefix+"-lock-a", f.prefix+"-lock-b"
	for _, o := range []string{a, b} {
		_, err := f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
			VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, o)
		require.NoError(t, err)
	}
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	var runs runCounter
	deadlocks := 0
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		n := runs.add(d.EventID)
		switch {
		case d.EventID == e2:
			return consumer.Retry(0, "member 2 is not ready"), nil
		case d.EventID == e3 && n == 1: // the careful pass (the first pass stopped at member 2)
			if _, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, a); err != nil {
				return consumer.Outcome{}, err
			}
			defer f.deadlockWith(a, b)()
			_, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, b)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock {
				deadlocks++
			}
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	require.Equal(t, 1, deadlocks, "the scenario produced its deadlock in the careful pass")
	assert.Equal(t, 2, runs.of(e3), "member 3: the lost careful pass, then the careful pass once more")
	for i, id := range []string{e1, e2, e3} {
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 1, id)
		assert.NotErrorIs(t, dec[0].Err, middleware.ErrBatchLost, id)
		if id == e2 {
			assert.Equal(t, consumer.KindRetry, dec[0].Chain.Kind)
			assert.Equal(t, "member 2 is not ready", dec[0].Chain.Reason)
			assert.Zero(t, f.ledger.Count(t, id))
			continue
		}
		assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s: %s (%v)", id, dec[0].Outcome, dec[0].Err)
		assert.Equal(t, 1, f.ledger.Count(t, id), "%s took effect once", id)
	}
}

// Shutdown while the first pass runs its members' handlers (in the batch's Finish): the handlers are
// cancelled, the callback is not answered (the client redelivers it as it was, no attempt spent), no
// decision is reported, and nothing commits — not even member 1, whose handler had returned.
func TestBatch_ShutdownDuringTheFirstPassAnswersNothingAndCommitsNothing(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	started := make(chan struct{})
	var once sync.Once
	h := f.chain(t, f.ledger.Handler(func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == e2 {
			once.Do(func() { close(started) })
			<-ctx.Done() // a long handler that honours its context
			return consumer.Outcome{}, ctx.Err()
		}
		return consumer.Processed(), nil
	}))
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, HandlerTimeout: 10 * time.Second, DrainTimeout: 100 * time.Millisecond}
	cb := testenv.NewCallback(t, cfg, h)
	stopped := make(chan error, 1)
	go func() {
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- cb.Shutdown(ctx)
	}()
	msgs := f.batchMsgs(t, e1, e2, e3)
	_, err := cb.Call(t, false, msgs...)
	assert.EqualError(t, err, "rmqguard consumer: stopped", "not answered")
	require.ErrorIs(t, <-stopped, context.DeadlineExceeded, "member 2's handler outlived DrainTimeout and was cancelled")
	for i, id := range []string{e1, e2, e3} {
		assert.Empty(t, cb.Decisions(msgs[i].MsgId), "%s: no decision", id)
		assert.Zero(t, f.ledger.Count(t, id), "%s: no effect", id)
		assert.Equal(t, "", f.status(t, id), "%s: no dedup row", id)
	}
}

// A panic in the first pass that does not come back in the careful pass (the handler recovered, or it
// depended on the order of the members) heals: the batch is Processed. But the panic does not vanish: it
// is logged once, at warn, with the member's event ID and the panic value (Recover never saw it: the
// member's handler ran in the batch's Finish). A batch handler's panic names the first member of its call.
func TestBatch_FirstPassPanicThatDoesNotRecurIsLoggedOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		panic string // the event whose handler panics, the member the line names
		h     func(f *fixture, panicky string, runs *runCounter) consumer.Handler
	}{
		{"handler", "-2", func(f *fixture, panicky string, runs *runCounter) consumer.Handler {
			return dedup.Handle(f.ledger.Handler(func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				if runs.add(d.EventID) == 1 && d.EventID == panicky {
					panic("member panics once")
				}
				return consumer.Processed(), nil
			}))
		}},
		{"batch handler", "-1", func(f *fixture, _ string, runs *runCounter) consumer.Handler {
			return dedup.HandleBatch(func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery) ([]consumer.Outcome, error) {
				if runs.add("call") == 1 {
					panic("member panics once")
				}
				outs := make([]consumer.Outcome, len(ds))
				for i, d := range ds {
					if err := f.ledger.Append(ctx, tx, d.EventID); err != nil {
						return nil, err
					}
					outs[i] = consumer.Processed()
				}
				return outs, nil
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
			core, logs := observer.New(zapcore.DebugLevel)
			log := zap.New(core)
			eventID, err := middleware.EventID(middleware.EventIDConfig{})
			require.NoError(t, err)
			h := testenv.Must(middleware.Chain(tc.h(f, f.prefix+tc.panic, &runCounter{}), middleware.Recover(log), middleware.Classify(), eventID,
				middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
				BatchSize: 32, HandlerTimeout: 5 * time.Second}
			cb := testenv.NewCallback(t, cfg, h, consumer.WithLogger(log))
			msgs := f.batchMsgs(t, e1, e2, e3)
			assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
			for i, id := range []string{e1, e2, e3} {
				assert.Equal(t, consumer.KindProcessed, cb.Decisions(msgs[i].MsgId)[0].Outcome.Kind, id)
				assert.Equal(t, 1, f.ledger.Count(t, id), "%s took effect once", id)
			}
			var lines []observer.LoggedEntry
			for _, e := range logs.All() {
				if e.Level >= zapcore.WarnLevel && strings.Contains(e.Message, "panic") {
					lines = append(lines, e)
				}
			}
			require.Len(t, lines, 1, "one line for the panic")
			assert.Equal(t, zapcore.WarnLevel, lines[0].Level, "healed: a warning, not an error")
			fields := lines[0].ContextMap()
			assert.Equal(t, f.prefix+tc.panic, fields["event_id"])
			assert.Contains(t, fields["error"], "member panics once", "the panic value")
		})
	}
}

// twoStoreRouter is a handler that routes a message by its tag to one of two complete chains, each with a
// Dedup of its own store (on f's database): tag "B" to the second. h is both chains' business handler.
func (f *fixture) twoStoreRouter(t *testing.T, h dedup.TxHandler) consumer.Handler {
	t.Helper()
	other := newStore(t, f.db)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	a := testenv.Must(middleware.Chain(dedup.Handle(h), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(f.store))))
	b := testenv.Must(middleware.Chain(dedup.Handle(h), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(other))))
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetTags() == "B" {
			return b.Handle(ctx, d)
		}
		return a.Handle(ctx, d)
	})
}

// A batch whose members go to two stores (a router with a Dedup per branch) cannot commit its first pass
// as one: when a member of one store is not kept, the other store's members must not have committed
// already. Concurrently: they would come back in the careful pass as duplicates "redelivered", though
// this delivery processed them. Orderly: a member behind the failed one would have taken effect before
// it. Each member is decided once, by the careful pass.
func TestBatch_MembersOfTwoStoresAreDecidedOnceByTheCarefulPass(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(map[bool]string{false: "concurrently", true: "orderly"}[orderly], func(t *testing.T) {
			f := newFixture(t)
			if orderly {
				f.db.SetMaxOpenConns(0)
			}
			e1, e2 := f.prefix+"-1", f.prefix+"-2"
			h := f.router2(t, e1)
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
				BatchSize: 32, Orderly: orderly, HandlerTimeout: 5 * time.Second}
			cb := testenv.NewCallback(t, cfg, h)
			msgs := f.batchMsgs(t, e1, e2)
			msgs[0].WithTag("B") // member 1, the one that fails, on the second store
			cb.Deliver(t, orderly, msgs...)
			dec := cb.Decisions(msgs[1].MsgId)
			if orderly {
				require.Len(t, dec, 1)
				assert.True(t, dec[0].Outcome.Kind == consumer.KindRetry && dec[0].Err == nil, "member 2 is held back behind member 1: %s", dec[0].Outcome)
				assert.Zero(t, f.ledger.Count(t, e2), "member 2 took no effect before member 1")
				assert.Equal(t, "", f.status(t, e2))
				return
			}
			require.Len(t, dec, 1)
			assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "member 2 was processed by this delivery: %s", dec[0].Outcome)
			assert.Equal(t, 1, f.ledger.Count(t, e2))
		})
	}
}

// router2 is twoStoreRouter around a ledger handler that fails failing's event with a retry.
func (f *fixture) router2(t *testing.T, failing string) consumer.Handler {
	return f.twoStoreRouter(t, f.ledger.Handler(func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == failing {
			return consumer.Retry(0, "member 1 is not ready"), nil
		}
		return consumer.Processed(), nil
	}))
}

// A first pass whose one claim statement waits for a row another transaction holds (a concurrent
// delivery of one of its events, whose transaction stays open) until the batch's deadline passes has not
// met a store outage: the store answered BEGIN and is merely waiting for a lock. It must not close the
// consumer's store gate (pausing every queue, reporting the store unavailable); the careful pass decides
// the members, the blocked one timing out on its own as a message alone would.
func TestBatch_FirstPassClaimWaitingForARowLockIsNotAStoreOutage(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	holder, err := f.db.Beginx()
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback() })
	_, err = holder.Exec(`INSERT INTO processed_event (consumer_group, event_id, topic, msg_id, consumed_at, result_status, claim_token)
		VALUES (?, ?, 'ORDER', 'another-delivery', UTC_TIMESTAMP(6), 'SUCCESS', 'other')`, f.group, e2)
	require.NoError(t, err)

	core, logs := observer.New(zapcore.InfoLevel)
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, HandlerTimeout: 300 * time.Millisecond, OutageWait: 5 * time.Second}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(f.ledger.Handler(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	})), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
	cb := testenv.NewCallback(t, cfg, h, consumer.WithLogger(zap.New(core)))
	msgs := f.batchMsgs(t, e1, e2, e3)
	cb.Deliver(t, false, msgs...)
	assert.Empty(t, logs.FilterMessageSnippet("store unavailable").All(), "the store gate stayed open")
	dec := cb.Decisions(msgs[1].MsgId)
	require.Len(t, dec, 1)
	assert.NotErrorIs(t, dec[0].Err, batch.ErrStoreUnavailable)
	assert.NotEqual(t, consumer.KindUnavailable, dec[0].Chain.Kind)
	assert.Zero(t, f.ledger.Count(t, e2), "member 2 was never applied while another transaction held its row")
}

// The other side of the rule above: a first pass whose claim statement loses its connection (the store's
// doing, while the batch's deadline is far) is a store outage: the consumer waits at the gate and handles
// the callback again, and every member is Processed on this delivery, once, spending no attempt.
func TestBatch_FirstPassClaimLostWithItsConnectionIsHandledAgainWithoutSpendingAnAttempt(t *testing.T) {
	f := newFixture(t)
	proxy := f.proxiedStore(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	var runs runCounter
	cb := f.batchConsumer(t, false, f.ledger.Handler(func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		runs.add(d.EventID)
		return consumer.Processed(), nil
	}))
	msgs := f.batchMsgs(t, e1, e2, e3)
	proxy.DropNext("INSERT IGNORE")
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	for i, id := range []string{e1, e2, e3} {
		assert.Equal(t, 1, runs.of(id), "%s: its handler ran in the pass after the gate only", id)
		assert.Equal(t, 1, f.ledger.Count(t, id), "%s took effect once", id)
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 1, id)
		assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s: %s (%v)", id, dec[0].Outcome, dec[0].Err)
		assert.False(t, dec[0].BatchRetried, id)
	}
}

// ClaimBatch tells duplicates apart as the table's key does, not as Go compares strings: event IDs the key
// takes for one (MariaDB's utf8mb4_bin pads spaces, so "x" and "x " collide; the EventID middleware trims
// IDs, a Delivery built by hand need not) are one event there, the second a duplicate without a failed
// statement, as its own claim alone would be (1062). A duplicate of an earlier batch's row is one too,
// and the batch's own rows are claimed.
func TestClaimBatch_EventIDsTheKeyTakesForOneAreOneEvent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	delivery := func(id string) *consumer.Delivery {
		d := testenv.NewDelivery(f.group, f.orderMsg(t, id, id))
		d.EventID = id
		return d
	}
	x, padded, y := f.prefix+"-x", f.prefix+"-x ", f.prefix+"-y"
	txn, err := f.store.Protocol().Begin(ctx)
	require.NoError(t, err)
	dup, err := f.store.Protocol().ClaimBatch(ctx, txn, []*consumer.Delivery{delivery(x), delivery(padded), delivery(y)})
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true, false}, dup)
	require.NoError(t, txn.Commit())
	assert.Equal(t, 1, f.dedupRows(t, x))

	txn, err = f.store.Protocol().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txn.Rollback() }()
	assert.ErrorIs(t, f.store.Protocol().Claim(ctx, txn, delivery(padded)), dedup.ErrDuplicate, "alone, the same finding")
	z := f.prefix + "-z"
	dup, err = f.store.Protocol().ClaimBatch(ctx, txn, []*consumer.Delivery{delivery(y + " "), delivery(z)})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, dup, "an earlier batch's row (padded) is a duplicate; the new one is claimed")
}
