package middleware_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
)

// F39: the dedup transaction commits, but COMMIT's answer reaches the consumer after the handler's
// deadline. The store's transactions go through a testenv.CommitProxy to the real MariaDB, which holds the
// server's answer to each COMMIT back; the rule is that a committed transaction is Processed whatever the
// clock says, and that only a handler ending late without a commit is a timeout.

// lastAttempt is the MaxAttempts of these tests' deliveries: a delivery with ReconsumeTimes 2 is the last.
const lastAttempt = 2

// lateCommit is a store whose transactions pass through a CommitProxy, with a ledger of the effects.
type lateCommit struct {
	db     *sqlx.DB
	proxy  *testenv.CommitProxy
	store  *dedup.Store
	ledger *testenv.Ledger
	run    string
	group  string
}

func newLateCommit(t *testing.T) *lateCommit {
	t.Helper()
	db := testenv.MySQL(t)
	proxy := testenv.NewCommitProxy(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(proxy.DSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	run := testenv.Unique("f39")
	return &lateCommit{db: db, proxy: proxy, store: store, ledger: testenv.NewLedger(t, db, run), run: run, group: testenv.Unique("cg")}
}

// chain is the recommended chain around a handler that records its effect in the ledger, with deadline
// in Deadline's place.
func (f *lateCommit) chain(t *testing.T, deadline middleware.Middleware) consumer.Handler {
	t.Helper()
	return f.chainOf(t, deadline, func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	})
}

func (f *lateCommit) chainOf(t *testing.T, deadline middleware.Middleware, h dedup.TxHandler) consumer.Handler {
	t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	return testenv.Must(middleware.Chain(dedup.Handle(f.ledger.Handler(h)), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, deadline, testenv.Must(middleware.Dedup(f.store))))
}

// msg is a message of event id on its delivery with ReconsumeTimes attempt.
func (f *lateCommit) msg(id string, attempt int) *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: id + "-msg", ReconsumeTimes: int32(attempt), Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
	m.WithProperty("EVENT_ID", id)
	return m
}

// delivery is the Delivery the consumer builds for msg, with MaxAttempts lastAttempt.
func (f *lateCommit) delivery(id string, attempt int) *consumer.Delivery {
	d := testenv.NewDelivery(f.group, f.msg(id, attempt))
	d.MaxAttempts = lastAttempt
	return d
}

// rows is the number of processed_event rows of event id.
func (f *lateCommit) rows(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, f.db.Get(&n, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, f.group, id))
	return n
}

// F39: COMMIT answered 1 s late, after a 300 ms deadline: Processed on the first delivery and on the last
// (where a timeout retry would have become a dead letter), with Deadline and with Timeout.
func TestDeadlineAndTimeout_CommitAnsweredAfterTheDeadlineIsProcessedOnEveryDelivery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline middleware.Middleware
	}{{"Deadline", middleware.Deadline(300 * time.Millisecond)}, {"Timeout", middleware.Timeout(300 * time.Millisecond)}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLateCommit(t)
			f.proxy.DelayCommitAnswers(time.Second)
			h := f.chain(t, tc.deadline)
			for _, attempt := range []int{0, lastAttempt} {
				id := fmt.Sprintf("%s-attempt-%d", f.run, attempt)
				start := time.Now()
				o, err := h.Handle(context.Background(), f.delivery(id, attempt))
				elapsed := time.Since(start)

				require.NoError(t, err, "attempt %d", attempt)
				assert.Equal(t, consumer.KindProcessed, o.Kind, "attempt %d: %s", attempt, o)
				assert.True(t, o.Committed, "attempt %d", attempt)
				assert.Equal(t, testenv.Answer{Result: rmq.ConsumeSuccess}, testenv.AnswerTo(t, o, err))
				assert.GreaterOrEqual(t, elapsed, time.Second, "attempt %d: the answer came after the deadline", attempt)
				assert.Equal(t, 1, f.rows(t, id))
				assert.Equal(t, 1, f.ledger.Count(t, id), "applied once")
			}
			assert.Equal(t, 2, f.proxy.Commits())
		})
	}
}

// F39: a handler that ignores its context and returns Processed after Timeout's deadline, with nothing
// committed yet, is still a timeout retry; and its late return commits nothing (no COMMIT reaches the
// server), so the redelivery applies the event once.
func TestTimeout_HandlerReturningAfterTheDeadlineWithoutACommitIsATimeoutAndCommitsNothing(t *testing.T) {
	f := newLateCommit(t)
	id := f.run + "-late"
	slow := true
	returned := make(chan struct{})
	h := f.chainOf(t, middleware.Timeout(200*time.Millisecond), func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		if slow {
			defer close(returned)
			time.Sleep(700 * time.Millisecond) // ignores its context
		}
		return consumer.Processed(), nil
	})

	start := time.Now()
	o, err := h.Handle(context.Background(), f.delivery(id, 0))
	assert.Less(t, time.Since(start), 600*time.Millisecond, "Timeout answered at its deadline")
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, causelabel.Timeout, o.Cause)
	assert.False(t, o.Committed)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	<-returned
	require.Eventually(t, func() bool { return f.store.Protocol().(txproto.Pooled).TxStats().InUse == 0 }, 5*time.Second, 10*time.Millisecond,
		"the late handler's transaction ended")
	assert.Zero(t, f.proxy.Commits(), "no COMMIT was sent for the late handler")
	assert.Zero(t, f.rows(t, id))
	assert.Zero(t, f.ledger.Count(t, id))

	slow = false
	o, err = h.Handle(context.Background(), f.delivery(id, 1))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, 1, f.ledger.Count(t, id), "applied once")
}

// F39 when COMMIT's answer never arrives (the connection closes first): the store reads the transaction's
// own row back (by its claim token) and the row decides, not the clock. The server committed: Processed,
// before the deadline and after it on the last delivery (not a timeout dead-lettered with its effect
// applied), with Deadline and with Timeout. The COMMIT never reached the server (it rolled back): not
// Processed, the store's failure (Unavailable, no attempt spent); the redelivery applies the event once.
func TestDeadlineAndTimeout_CommitWhoseAnswerIsLostIsDecidedByTheRowItLeft(t *testing.T) {
	for _, mw := range []struct {
		name     string
		deadline func(time.Duration) middleware.Middleware
	}{{"Deadline", middleware.Deadline}, {"Timeout", middleware.Timeout}} {
		for _, tc := range []struct {
			name     string
			deadline time.Duration
			lose     func(p *testenv.CommitProxy)
			want     consumer.Kind
			rows     int
		}{
			{"committed, answer lost before the deadline", 10 * time.Second, func(p *testenv.CommitProxy) { p.LoseCommitAnswers(0) },
				consumer.KindProcessed, 1},
			{"committed, answer lost after the deadline", 300 * time.Millisecond, func(p *testenv.CommitProxy) { p.LoseCommitAnswers(time.Second) },
				consumer.KindProcessed, 1},
			{"COMMIT never reached the server", 10 * time.Second, (*testenv.CommitProxy).DropCommits, consumer.KindUnavailable, 0},
		} {
			t.Run(mw.name+" "+tc.name, func(t *testing.T) {
				f := newLateCommit(t)
				h := f.chain(t, mw.deadline(tc.deadline))
				id := f.run + "-lost"
				tc.lose(f.proxy)

				o, err := h.Handle(context.Background(), f.delivery(id, lastAttempt))
				assert.Equal(t, tc.want, o.Kind, "%s (%v)", o, err)
				assert.Equal(t, tc.want == consumer.KindProcessed, o.Committed)
				assert.Equal(t, tc.rows, f.rows(t, id))
				assert.Equal(t, tc.rows, f.ledger.Count(t, id))

				f.proxy.DelayCommitAnswers(0)
				o, err = h.Handle(context.Background(), f.delivery(id, 1))
				require.NoError(t, err)
				assert.True(t, o.Kind.Acknowledges(), "%s", o)
				assert.Equal(t, 1, f.ledger.Count(t, id), "applied once")
			})
		}
	}
}

// F39 for a duplicate: the event's row committed on an earlier delivery, and the store's answer about it
// (the SELECT of the duplicate's cause) comes after the deadline: the message is a Duplicate, acknowledged
// on its last delivery, with Deadline and with Timeout, not a timeout dead-lettered.
func TestDeadlineAndTimeout_DuplicateFoundAfterTheDeadlineIsADuplicateOnTheLastDelivery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline middleware.Middleware
	}{{"Deadline", middleware.Deadline(300 * time.Millisecond)}, {"Timeout", middleware.Timeout(300 * time.Millisecond)}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLateCommit(t)
			h := f.chain(t, tc.deadline)
			id := f.run + "-dup"
			o, err := h.Handle(context.Background(), f.delivery(id, 0))
			require.NoError(t, err)
			require.Equal(t, consumer.KindProcessed, o.Kind)
			f.proxy.DelayAnswers("SELECT msg_id FROM", time.Second)

			start := time.Now()
			o, err = h.Handle(context.Background(), f.delivery(id, lastAttempt))
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the store answered after the deadline")
			assert.Equal(t, consumer.KindDuplicate, o.Kind, "%s", o)
			assert.True(t, o.Committed)
			assert.Equal(t, 1, f.ledger.Count(t, id), "applied once")
		})
	}
}

// F39 in a batch (BatchSize > 1): the batch's one COMMIT is answered after the batch's deadline
// (HandlerTimeout × members) on the members' last delivery: every member is Processed and the callback
// acknowledged, with Deadline and with Timeout in the chain.
func TestBatch_CommitAnsweredAfterTheBatchDeadlineIsProcessedOnTheLastDelivery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline middleware.Middleware
	}{{"Deadline", middleware.Deadline(0)}, {"Timeout", middleware.Timeout(0)}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLateCommit(t)
			const handlerTimeout = 300 * time.Millisecond
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
				BatchSize: 4, HandlerTimeout: handlerTimeout, MaxAttempts: lastAttempt}
			cb := testenv.NewCallback(t, cfg, f.chain(t, tc.deadline))
			var msgs []*primitive.MessageExt
			for i := range 3 {
				msgs = append(msgs, f.msg(fmt.Sprintf("%s-member-%d", f.run, i), lastAttempt))
			}
			f.proxy.DelayCommitAnswers(3*handlerTimeout + 600*time.Millisecond)

			start := time.Now()
			assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
			assert.GreaterOrEqual(t, time.Since(start), 3*handlerTimeout, "the answer came after the batch's deadline")
			assert.Equal(t, 1, f.proxy.Commits(), "one COMMIT for the batch")
			for _, m := range msgs {
				id := m.GetProperty("EVENT_ID")
				dec := cb.Decisions(m.MsgId)
				require.Len(t, dec, 1, id)
				assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s: %s (%v)", id, dec[0].Outcome, dec[0].Err)
				assert.False(t, dec[0].BatchRetried, id)
				assert.Equal(t, 1, f.ledger.Count(t, id), "%s applied once", id)
			}
		})
	}
}

// F39 in a batch whose one COMMIT's answer is lost (the server committed, then the connection closed), on
// the members' last delivery: the kept rows decide, so every member is Processed and the callback
// acknowledged, once each, not retried or dead-lettered.
func TestBatch_CommitWhoseAnswerIsLostIsProcessedOnTheLastDelivery(t *testing.T) {
	f := newLateCommit(t)
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 4, HandlerTimeout: 300 * time.Millisecond, MaxAttempts: lastAttempt}
	cb := testenv.NewCallback(t, cfg, f.chain(t, middleware.Deadline(0)))
	var msgs []*primitive.MessageExt
	for i := range 3 {
		msgs = append(msgs, f.msg(fmt.Sprintf("%s-member-%d", f.run, i), lastAttempt))
	}
	f.proxy.LoseCommitAnswers(time.Second) // after the batch's deadline (3 × 300 ms)

	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, 1, f.proxy.Commits(), "one COMMIT for the batch")
	for _, m := range msgs {
		id := m.GetProperty("EVENT_ID")
		dec := cb.Decisions(m.MsgId)
		require.Len(t, dec, 1, id)
		assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s: %s (%v)", id, dec[0].Outcome, dec[0].Err)
		assert.Equal(t, 1, f.ledger.Count(t, id), "%s applied once", id)
	}
}

// F39 in orderly mode: the COMMIT of a message on its last delivery is answered after HandlerTimeout; the
// message is Processed and acknowledged, not dead-lettered by the consumer (which publishes orderly dead
// letters itself).
func TestOrderly_CommitAnsweredAfterTheHandlerTimeoutIsProcessedOnTheLastDelivery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline middleware.Middleware
	}{{"Deadline", middleware.Deadline(0)}, {"Timeout", middleware.Timeout(0)}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLateCommit(t)
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
				Orderly: true, HandlerTimeout: 300 * time.Millisecond, MaxAttempts: lastAttempt}
			cb := testenv.NewCallback(t, cfg, f.chain(t, tc.deadline))
			m := f.msg(f.run+"-orderly", lastAttempt)
			f.proxy.DelayCommitAnswers(time.Second)

			assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, true, m))
			dec := cb.Decisions(m.MsgId)
			require.Len(t, dec, 1)
			assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s (%v)", dec[0].Outcome, dec[0].Err)
			assert.True(t, dec[0].Chain.Committed)
			assert.Equal(t, 1, f.proxy.Commits())
			assert.Equal(t, 1, f.ledger.Count(t, m.GetProperty("EVENT_ID")), "applied once")
		})
	}
}

// F39 and the drain on shutdown: Shutdown cancels the handlers still running at DrainTimeout; a message
// whose COMMIT was already sent then is Processed and acknowledged when the answer comes, not left
// unanswered as a cancelled handler's message is.
func TestShutdown_CommitAnsweredAfterTheHandlersWereCancelledIsProcessed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline middleware.Middleware
	}{{"Deadline", middleware.Deadline(0)}, {"Timeout", middleware.Timeout(0)}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLateCommit(t)
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
				HandlerTimeout: 10 * time.Second, DrainTimeout: 100 * time.Millisecond}
			cb := testenv.NewCallback(t, cfg, f.chain(t, tc.deadline))
			m := f.msg(f.run+"-drain", 0)
			f.proxy.DelayCommitAnswers(1500 * time.Millisecond)
			stopped := make(chan error, 1)
			go func() {
				for f.proxy.Commits() == 0 { // the COMMIT is on its way: the handler is past its writes
					time.Sleep(5 * time.Millisecond)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stopped <- cb.Shutdown(ctx)
			}()

			assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, m))
			require.ErrorIs(t, <-stopped, context.DeadlineExceeded, "the handler outlived DrainTimeout and was cancelled")
			dec := cb.Decisions(m.MsgId)
			require.Len(t, dec, 1)
			assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s (%v)", dec[0].Outcome, dec[0].Err)
			assert.Equal(t, 1, f.ledger.Count(t, m.GetProperty("EVENT_ID")), "applied once")
		})
	}
}

// onSharedPool makes f's store run everything on one pool through the proxy (dedup.NewStore(db), no
// WithTxDSN), with interpolateParams, so that the proxy sees every statement of the store, RecordStale's too.
func (f *lateCommit) onSharedPool(t *testing.T) {
	t.Helper()
	cfg, err := mysql.ParseDSN(f.proxy.DSN())
	require.NoError(t, err)
	cfg.InterpolateParams = true
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	f.store, err = dedup.NewStore(db)
	require.NoError(t, err)
}

// staleRows is the result_status of each processed_event row of event id.
func (f *lateCommit) staleRows(t *testing.T, id string) []string {
	t.Helper()
	var status []string
	require.NoError(t, f.db.Select(&status, `SELECT result_status FROM processed_event WHERE consumer_group = ? AND event_id = ?`, f.group, id))
	return status
}

// F39 for a stale decision, on the last delivery: its STALE row is the event's dedup row. When the
// recording's COMMIT is answered after the deadline, the row committed and the message is Stale
// (acknowledged, not dead-lettered); when the recording's INSERT is still unanswered at the deadline,
// nothing commits and the message is a timeout. Either way it is acknowledged exactly when the row is there.
func TestDeadlineAndTimeout_StaleDecisionRecordedAfterTheDeadlineIsAcknowledgedOnlyWithItsRow(t *testing.T) {
	for _, mw := range []struct {
		name     string
		deadline middleware.Middleware
	}{{"Deadline", middleware.Deadline(300 * time.Millisecond)}, {"Timeout", middleware.Timeout(300 * time.Millisecond)}} {
		for _, tc := range []struct {
			late string // the statement whose answer comes 1 s late
			want consumer.Kind
			rows []string
		}{
			{"COMMIT", consumer.KindStale, []string{dedupsql.ResultStale}},
			{"INSERT", consumer.KindDeadLetter, nil}, // a timeout on the last delivery: retries exhausted
		} {
			t.Run(mw.name+" "+tc.late, func(t *testing.T) {
				f := newLateCommit(t)
				f.onSharedPool(t)
				h := f.chainOf(t, mw.deadline, func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
					f.proxy.DelayAnswers(tc.late, time.Second) // from the recording of the decision on
					return consumer.Stale("an older version"), nil
				})
				id := f.run + "-stale"

				o, err := h.Handle(context.Background(), f.delivery(id, lastAttempt))
				time.Sleep(time.Second) // a statement the client gave up on has reached the server

				assert.Equal(t, tc.want, o.Kind, "%s (%v)", o, err)
				assert.Equal(t, tc.rows, f.staleRows(t, id))
				assert.Equal(t, o.Kind.Acknowledges(), len(f.staleRows(t, id)) == 1, "acknowledged exactly when the row committed")
			})
		}
	}
}
