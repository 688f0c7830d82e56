package dedup_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// insertOrders writes one orders row per order number in one multi-row statement.
func insertOrders(ctx context.Context, tx *sqlx.Tx, orderNos []string) error {
	if len(orderNos) == 0 {
		return nil
	}
	rows := strings.TrimSuffix(strings.Repeat(`(?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6)),`, len(orderNos)), ",")
	args := make([]any, len(orderNos))
	for i, no := range orderNos {
		args[i] = no
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at) VALUES `+rows, args...)
	return err
}

// batchCalls is a batch handler that records the event IDs of each call, writes the orders of the
// deliveries it does not fail in one statement, and answers a retry for the events in fail.
type batchCalls struct {
	mu    sync.Mutex
	calls [][]string
	fail  map[string]bool
}

func (b *batchCalls) handle(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery) ([]consumer.Outcome, error) {
	ids := make([]string, len(ds))
	outs := make([]consumer.Outcome, len(ds))
	var write []string
	b.mu.Lock()
	for i, d := range ds {
		ids[i] = d.EventID
		outs[i] = consumer.Processed()
		if b.fail[d.EventID] {
			outs[i] = consumer.Retry(0, "its account is not open yet")
			continue
		}
		write = append(write, d.EventID)
	}
	b.calls = append(b.calls, ids)
	b.mu.Unlock()
	return outs, insertOrders(ctx, tx, write)
}

func (b *batchCalls) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n []int
	for _, c := range b.calls {
		n = append(n, len(c))
	}
	b.calls = nil
	return n
}

// deadLetters is a DeadLetterSink that records the event IDs it was given.
type deadLetters struct {
	mu  sync.Mutex
	ids []string
}

func (s *deadLetters) DeadLetter(_ context.Context, d *consumer.Delivery, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, d.EventID)
	return nil
}

// chainOf is f.chain around a handler that is not a TxHandler (a HandleBatch result).
func (f *fixture) chainOf(t testing.TB, h consumer.Handler) consumer.Handler {
	t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	return testenv.Must(middleware.Chain(h, testenv.Must(middleware.Metrics(f.metrics)), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, testenv.Must(middleware.Dedup(f.store))))
}

// batchHandlerConsumer is f's chain around dedup.HandleBatch(h), behind a consumer with BatchSize 32,
// MaxAttempts 3 and a dead-letter sink.
func (f *fixture) batchHandlerConsumer(t *testing.T, h consumer.Handler, sink consumer.DeadLetterSink) *testenv.Callback {
	t.Helper()
	cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32, MaxAttempts: 3, HandlerTimeout: 5 * time.Second}
	return testenv.NewCallback(t, cfg, f.chainOf(t, h), consumer.WithDeadLetterSink(sink))
}

// F38: a batch handler runs once for the batch's new members and returns an outcome per
// member; when it fails one, that member alone is retried (the batch is handled again carefully, the
// handler called with one member at a time inside its savepoint) and the others commit once. On the
// redelivery the handler gets the failed member alone (the others are duplicates, left out).
func TestBatchHandler_F38_FailedMemberAloneIsRetriedOthersCommitOnce(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3, e4 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3", f.prefix+"-4"
	h := &batchCalls{fail: map[string]bool{e2: true}}
	cb := f.batchHandlerConsumer(t, dedup.HandleBatch(h.handle), &deadLetters{})
	msgs := f.batchMsgs(t, e1, e2, e3, e4)
	assert.Equal(t, rmq.ConsumeRetryLater, cb.Deliver(t, false, msgs...))
	assert.Equal(t, []int{4, 1, 1, 1, 1}, h.sizes(), "one call for the batch, then one per member in the careful pass")
	for i, id := range []string{e1, e2, e3, e4} {
		dec := cb.Decisions(msgs[i].MsgId)
		require.Len(t, dec, 1)
		if id == e2 {
			assert.Equal(t, consumer.KindRetry, dec[0].Outcome.Kind)
			assert.Equal(t, "", f.status(t, id), "the failed member claimed nothing")
			assert.Zero(t, f.orderRows(t, id))
			continue
		}
		assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, id)
		assert.True(t, dec[0].BatchRetried, id)
		assert.Equal(t, 1, f.orderRows(t, id), "%s committed once", id)
	}

	h.fail = nil
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, []int{1}, h.sizes(), "the duplicates are left out of the call")
	for i, id := range []string{e1, e2, e3, e4} {
		want := consumer.KindDuplicate
		if id == e2 {
			want = consumer.KindProcessed
		}
		assert.Equal(t, want, cb.Decisions(msgs[i].MsgId)[1].Outcome.Kind, id)
		assert.Equal(t, 1, f.orderRows(t, id), "%s took effect once", id)
	}
}

// F38 on the last attempt: the member the batch handler still fails is dead-lettered alone (published by
// the consumer, the batch acknowledged); the others commit once and are not in the DLQ.
func TestBatchHandler_F38_FailedMemberOnItsLastAttemptIsDeadLetteredAlone(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	h := &batchCalls{fail: map[string]bool{e2: true}}
	sink := &deadLetters{}
	cb := f.batchHandlerConsumer(t, dedup.HandleBatch(h.handle), sink)
	msgs := f.batchMsgs(t, e1, e2, e3)
	for _, m := range msgs {
		m.ReconsumeTimes = 3 // MaxAttempts: the last delivery
	}
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, []string{e2}, sink.ids, "the failed member alone is dead-lettered")
	assert.Equal(t, consumer.KindDeadLettered, cb.Decisions(msgs[1].MsgId)[0].Outcome.Kind)
	for _, id := range []string{e1, e3} {
		assert.Equal(t, 1, f.orderRows(t, id), "%s committed once", id)
	}
	assert.Zero(t, f.orderRows(t, e2))
}

// A happy batch through a batch handler sends BEGIN, one claim, the handler's one
// multi-row write and COMMIT, whatever the number of members.
func TestBatchHandler_HappyBatchSendsFourStatements(t *testing.T) {
	f := newFixture(t)
	proxy := f.proxiedStore(t)
	h := &batchCalls{}
	cb := f.batchHandlerConsumer(t, dedup.HandleBatch(h.handle), &deadLetters{})
	ids := []string{f.prefix + "-1", f.prefix + "-2", f.prefix + "-3", f.prefix + "-4", f.prefix + "-5"}
	proxy.RecordStatements()
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, f.batchMsgs(t, ids...)...))
	assert.Equal(t, []string{"START", "INSERT IGNORE INTO", "INSERT INTO DEDUP_TEST_ORDER", "COMMIT"}, statementKinds(proxy.Statements()))
	assert.Equal(t, []int{5}, h.sizes())
	for _, id := range ids {
		assert.Equal(t, 1, f.orderRows(t, id))
	}
}

// dedup.HandleBatchJSON decodes each body into its own value for the batch handler; a body that does not
// decode is left out of the call and dead-lettered alone (the careful pass, as HandleJSON would), the
// others commit once.
func TestHandleBatchJSON_UndecodableMemberIsDeadLetteredAlone(t *testing.T) {
	f := newFixture(t)
	e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
	var mu sync.Mutex
	var got []string
	h := dedup.HandleBatchJSON(func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery, msgs []orderCreated) ([]consumer.Outcome, error) {
		outs := make([]consumer.Outcome, len(ds))
		nos := make([]string, len(msgs))
		mu.Lock()
		for i, m := range msgs {
			outs[i], nos[i] = consumer.Processed(), m.OrderNo
			got = append(got, m.OrderNo)
		}
		mu.Unlock()
		return outs, insertOrders(ctx, tx, nos)
	})
	sink := &deadLetters{}
	cb := f.batchHandlerConsumer(t, h, sink)
	msgs := f.batchMsgs(t, e1, e2, e3)
	msgs[1].Body = []byte("not json")
	assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	assert.Equal(t, []string{e2}, sink.ids)
	assert.Equal(t, []string{e1, e3, e1, e3}, got, "the batch's call, then the careful pass's, without the undecodable body")
	dec := cb.Decisions(msgs[1].MsgId)
	require.Len(t, dec, 1)
	assert.Equal(t, causelabel.Permanent, dec[0].Outcome.Cause)
	for _, id := range []string{e1, e3} {
		assert.Equal(t, 1, f.orderRows(t, id))
	}
}

// A HandleBatch result is a Handle result (middleware.Chain refuses it without Dedup); outside a batch
// (BatchSize 1) the batch handler is called with the one delivery.
func TestHandleBatch_AloneIsCalledWithOneDelivery(t *testing.T) {
	f := newFixture(t)
	h := &batchCalls{}
	bh := dedup.HandleBatch(h.handle)
	assert.True(t, dedup.IsTxHandler(bh))
	o, err := f.handle(f.chainOf(t, bh), f.orderMsg(t, f.prefix+"-1", f.prefix+"-1"))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, []int{1}, h.sizes())
	assert.Equal(t, 1, f.orderRows(t, f.prefix+"-1"))
}

// Whatever keeps member 2 of a batch's first pass from being kept — an error, a retry, a
// dead letter, stale, a panic, a handler past its deadline — the consumer handles the batch again
// carefully: member 2 alone is decided (retried, dead-lettered, recorded stale), the others commit once, in
// one COMMIT of the careful pass (the first pass committed nothing).
func TestBatch_MemberNotKeptInTheFirstPassIsDecidedAloneInTheCarefulPass(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func() (consumer.Outcome, error)
		want consumer.Kind
	}{
		{"error", func() (consumer.Outcome, error) { return consumer.Outcome{}, errors.New("member 2 fails") }, consumer.KindRetry},
		{"retry", func() (consumer.Outcome, error) { return consumer.Retry(0, "not yet"), nil }, consumer.KindRetry},
		{"dead letter", func() (consumer.Outcome, error) { return consumer.DeadLetter("never"), nil }, consumer.KindDeadLettered},
		{"stale", func() (consumer.Outcome, error) { return consumer.Stale("older"), nil }, consumer.KindStale},
		{"panic", func() (consumer.Outcome, error) { panic("member 2 panics") }, consumer.KindRetry},
		{"past its deadline", func() (consumer.Outcome, error) {
			time.Sleep(400 * time.Millisecond)
			return consumer.Processed(), nil
		}, consumer.KindRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			e1, e2, e3 := f.prefix+"-1", f.prefix+"-2", f.prefix+"-3"
			proxy := f.proxiedStore(t)
			eventID, err := middleware.EventID(middleware.EventIDConfig{})
			require.NoError(t, err)
			h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				if err := insertOrders(ctx, tx, []string{d.EventID}); err != nil {
					return consumer.Outcome{}, err
				}
				if d.EventID == e2 {
					return tc.fail()
				}
				return consumer.Processed(), nil
			}), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
			sink := &deadLetters{}
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
				BatchSize: 32, HandlerTimeout: 300 * time.Millisecond}
			cb := testenv.NewCallback(t, cfg, h, consumer.WithDeadLetterSink(sink))
			msgs := f.batchMsgs(t, e1, e2, e3)
			proxy.RecordStatements()
			cb.Deliver(t, false, msgs...)
			assert.Equal(t, tc.want, cb.Decisions(msgs[1].MsgId)[0].Outcome.Kind)
			assert.Zero(t, f.orderRows(t, e2), "member 2's write is not kept")
			for _, id := range []string{e1, e3} {
				assert.Equal(t, 1, f.orderRows(t, id), "%s committed once", id)
			}
			commits := 0
			for _, k := range statementKinds(proxy.Statements()) {
				if k == "COMMIT" {
					commits++
				}
			}
			assert.Equal(t, 1, commits, "one COMMIT: the careful pass's")
			if tc.want == consumer.KindDeadLettered {
				assert.Equal(t, []string{e2}, sink.ids)
			}
		})
	}
}
