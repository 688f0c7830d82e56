package dedup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// fixture is a chain on the real test database: Metrics → Recover → Classify → EventID → Dedup → handler.
type fixture struct {
	db      *sqlx.DB
	store   *dedup.Store
	metrics *metrics.Metrics
	group   string
	prefix  string // order numbers and event IDs of this test start with it
	// ledger is an effect without a unique key: an event applied twice has two rows there, where the
	// orders table's primary key would turn the second apply into a 1062 retry.
	ledger *testenv.Ledger
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := businessDB(t)
	store := newStore(t, db)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	prefix := testenv.Unique("o")
	return &fixture{db: db, store: store, metrics: m, group: testenv.Unique("cg"), prefix: prefix,
		ledger: testenv.NewLedger(t, db, prefix)}
}

// newStore is the store of the fixture: on its own transaction pool (dedup.WithTxDSN, the fast path), or on
// db's pool with autocommit toggled per message when RMQGUARD_TEST_DEDUP_TXPOOL=0 (run the tests both ways).
func newStore(t testing.TB, db *sqlx.DB) *dedup.Store {
	t.Helper()
	var opts []dedup.Option
	if os.Getenv("RMQGUARD_TEST_DEDUP_TXPOOL") != "0" {
		opts = append(opts, dedup.WithTxDSN(testenv.MySQLDSN()))
	}
	store, err := dedup.NewStore(db, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	return store
}

func (f *fixture) chain(t testing.TB, h dedup.TxHandler) consumer.Handler {
	t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	return testenv.Must(middleware.Chain(dedup.Handle(h),
		testenv.Must(middleware.Metrics(f.metrics)), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, testenv.Must(middleware.Dedup(f.store))))
}

// handle runs one message through h as the consumer would (testenv.AnswerTo gives the client's answer).
func (f *fixture) handle(h consumer.Handler, msg *primitive.MessageExt) (consumer.Outcome, error) {
	return h.Handle(context.Background(), testenv.NewDelivery(f.group, msg))
}

// orderMsg is a physical message (its own MsgId) carrying an OrderCreated event.
func (f *fixture) orderMsg(t testing.TB, eventID, orderNo string) *primitive.MessageExt {
	t.Helper()
	body, err := json.Marshal(orderCreated{EventID: eventID, OrderNo: orderNo, SkuID: "sku-1", Quantity: 2, AmountCents: 1250})
	require.NoError(t, err)
	msg := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER", Body: body}}
	msg.WithKeys([]string{orderNo})
	msg.WithTag(eventOrderCreated)
	msg.WithProperty("EVENT_ID", eventID)
	return msg
}

func (f *fixture) effects(t *testing.T) (orders, reservations int) {
	t.Helper()
	o, r, err := businessEffects(context.Background(), f.db, f.prefix)
	require.NoError(t, err)
	return o, r
}

func (f *fixture) dedupRows(t *testing.T, eventID string) int {
	t.Helper()
	var n int
	require.NoError(t, f.db.Get(&n, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, f.group, eventID))
	return n
}

// requireOnceThenDuplicate delivers the event twice more: the first delivery is processed, the second is a
// duplicate.
func (f *fixture) requireOnceThenDuplicate(t testing.TB, h consumer.Handler, eventID, order string) {
	t.Helper()
	for _, want := range []consumer.Kind{consumer.KindProcessed, consumer.KindDuplicate} {
		o, err := f.handle(h, f.orderMsg(t, eventID, order))
		require.NoError(t, err)
		require.Equal(t, want, o.Kind)
	}
}

func (f *fixture) count(c *prometheus.CounterVec, labels ...string) float64 {
	return testutil.ToFloat64(c.WithLabelValues(labels...))
}

// S1: the same event delivered twice in a row is applied once; the second message (its own MsgId) is a
// duplicate with the cause "resend".
func TestDedup_SameEventTwiceInARowAppliesOnce(t *testing.T) {
	f := newFixture(t)
	h := f.chain(t, f.ledger.Handler(handleOrderCreated))
	ev, order := f.prefix+"-e", f.prefix+"-1"

	o1, err := f.handle(h, f.orderMsg(t, ev, order))
	r1 := testenv.AnswerTo(t, o1, err)
	require.NoError(t, err)
	o2, err := f.handle(h, f.orderMsg(t, ev, order))
	r2 := testenv.AnswerTo(t, o2, err)
	require.NoError(t, err)

	assert.Equal(t, consumer.KindProcessed, o1.Kind)
	assert.Equal(t, consumer.KindDuplicate, o2.Kind)
	assert.Equal(t, rmq.ConsumeSuccess, r1.Result)
	assert.Equal(t, rmq.ConsumeSuccess, r2.Result)
	orders, reservations := f.effects(t)
	assert.Equal(t, 1, orders)
	assert.Equal(t, 1, reservations)
	assert.Equal(t, 1, f.ledger.Count(t, ev), "applied once")
	assert.Equal(t, causelabel.Resend, o2.Cause, "a new message (its own MsgId) with the same event ID")
}

// S2: 16 copies of one event handled at once give one effect and one dedup row; the others are
// duplicates or retries (never dead letters), and each retried copy is a duplicate on its redelivery.
func TestDedup_ConcurrentCopiesApplyOnce(t *testing.T) {
	f := newFixture(t)
	h := f.chain(t, f.ledger.Handler(handleOrderCreated))
	ev, order := f.prefix+"-e", f.prefix+"-1"

	const n = 16
	kinds := make([]consumer.Kind, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := f.orderMsg(t, ev, order)
			<-start
			o, _ := f.handle(h, msg)
			kinds[i] = o.Kind
		}()
	}
	close(start)
	wg.Wait()

	byKind := map[consumer.Kind]int{}
	for _, k := range kinds {
		byKind[k]++
	}
	assert.Equal(t, 1, byKind[consumer.KindProcessed], "exactly one winner: %v", byKind)
	assert.Zero(t, byKind[consumer.KindDeadLetter], "no loser is dead-lettered: %v", byKind)
	assert.Equal(t, n, byKind[consumer.KindProcessed]+byKind[consumer.KindDuplicate]+byKind[consumer.KindRetry], "%v", byKind)
	orders, reservations := f.effects(t)
	assert.Equal(t, 1, orders)
	assert.Equal(t, 1, reservations)
	assert.Equal(t, 1, f.dedupRows(t, ev))
	assert.Equal(t, 1, f.ledger.Count(t, ev), "applied once")

	// Every loser that was told to retry is a duplicate on its redelivery.
	for range byKind[consumer.KindRetry] {
		o, err := f.handle(h, f.orderMsg(t, ev, order))
		require.NoError(t, err)
		assert.Equal(t, consumer.KindDuplicate, o.Kind)
	}
	orders, _ = f.effects(t)
	assert.Equal(t, 1, orders)
	assert.Equal(t, 1, f.ledger.Count(t, ev), "still applied once after the redeliveries")
}

// S4, F1: a failed attempt is retried, never acknowledged, and leaves neither a dedup row nor an effect;
// the retry applies the event once and a later redelivery is a duplicate.
func TestDedup_FailedAttemptLeavesNoDedupRowAndRetryAppliesOnce(t *testing.T) {
	f := newFixture(t)
	ev, order := f.prefix+"-e", f.prefix+"-1"
	failing := true
	h := f.chain(t, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if failing {
			return consumer.Outcome{}, errors.New("db down")
		}
		return handleOrderCreated(ctx, tx, d)
	}))

	o, err := f.handle(h, f.orderMsg(t, ev, order))
	r := testenv.AnswerTo(t, o, err)
	require.Error(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, rmq.ConsumeRetryLater, r.Result, "F1: an error is never acknowledged")
	assert.Equal(t, 0, f.dedupRows(t, ev), "a failed attempt leaves no dedup row")
	assert.Equal(t, 0, f.ledger.Count(t, ev), "and no effect")
	assert.Equal(t, 1.0, f.count(f.metrics.Errors, f.group, "ORDER", "unknown"), "the chain's error is counted by class")

	failing = false
	retried := f.orderMsg(t, ev, order)
	retried.ReconsumeTimes = 1
	o, err = f.handle(h, retried)
	r = testenv.AnswerTo(t, o, err)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, rmq.ConsumeSuccess, r.Result)
	orders, reservations := f.effects(t)
	assert.Equal(t, 1, orders)
	assert.Equal(t, 1, reservations)
	assert.Equal(t, 1, f.dedupRows(t, ev))
	assert.Equal(t, 1, f.ledger.Count(t, ev))
	o, err = f.handle(h, f.orderMsg(t, ev, order))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, 1, f.ledger.Count(t, ev), "a later redelivery is a duplicate, not a second effect")
}

// TestF2_Chain_PanicRollsBackAndOthersProceed is F2 at the chain: the broker half (the queue moves on and
// the message returns at the retry delay) is TestE2E_F2_PanicIsRetriedAtTheRetryDelayWhileTheQueueMovesOn.
func TestF2_Chain_PanicRollsBackAndOthersProceed(t *testing.T) {
	f := newFixture(t)
	panicky := f.prefix + "-p1"
	h := f.chain(t, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := handleOrderCreated(ctx, tx, d); err != nil {
			return consumer.Outcome{}, err
		}
		if d.EventID == panicky && d.Attempt == 0 {
			panic("boom after the business writes")
		}
		return consumer.Processed(), nil
	}))

	o, err := f.handle(h, f.orderMsg(t, panicky, panicky))
	r := testenv.AnswerTo(t, o, err)
	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, rmq.ConsumeRetryLater, r.Result)
	assert.Equal(t, 1.0, f.count(f.metrics.Panics, f.group, "ORDER"))
	assert.Equal(t, 0, f.dedupRows(t, panicky), "the panicking transaction rolled back")

	for i := range 100 {
		id := fmt.Sprintf("%s-%03d", f.prefix, i)
		o, err := f.handle(h, f.orderMsg(t, id, id))
		require.NoError(t, err)
		require.Equal(t, consumer.KindProcessed, o.Kind)
	}
	orders, _ := f.effects(t)
	assert.Equal(t, 100, orders, "the panicking order wrote nothing; the 100 others did")

	again := f.orderMsg(t, panicky, panicky)
	again.ReconsumeTimes = 1
	o, err = f.handle(h, again)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	orders, reservations := f.effects(t)
	assert.Equal(t, 101, orders)
	assert.Equal(t, 101, reservations)
	f.ledger.RequireOncePerEvent(t, 101)
}

func TestF11_SameBusinessIDDifferentMessageIDs(t *testing.T) {
	f := newFixture(t)
	h := f.chain(t, f.ledger.Handler(handleOrderCreated))
	order := f.prefix + "-pay-123"
	first := f.orderMsg(t, "evt-9-"+f.prefix, order)
	second := f.orderMsg(t, "evt-9-"+f.prefix, order)
	require.NotEqual(t, first.MsgId, second.MsgId)

	o1, err := f.handle(h, first)
	require.NoError(t, err)
	o2, err := f.handle(h, second)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o1.Kind)
	assert.Equal(t, consumer.KindDuplicate, o2.Kind)
	orders, _ := f.effects(t)
	assert.Equal(t, 1, orders)
	assert.Equal(t, 1, f.ledger.Count(t, "evt-9-"+f.prefix), "applied once")
}

func TestF11_NoBusinessIDIsDeadLetteredNotRetried(t *testing.T) {
	f := newFixture(t)
	h := f.chain(t, handleOrderCreated)
	msg := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}

	o, err := f.handle(h, msg)
	r := testenv.AnswerTo(t, o, err)
	require.ErrorIs(t, err, middleware.ErrUnidentifiable)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, testenv.DelayLevelDLQ, r.DelayLevel)
	assert.Equal(t, 1.0, f.count(f.metrics.Unidentifiable, f.group, "ORDER"))
}

func TestF13_SecondStepFailsNothingCommitsRedeliveryAppliesOnce(t *testing.T) {
	f := newFixture(t)
	ev, order := f.prefix+"-e", f.prefix+"-1"
	failSecondStep := true
	h := f.chain(t, f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
			VALUES (?, 'sku-1', 1, 100, 'CREATED', 1, NOW(6), NOW(6))`, order); err != nil {
			return consumer.Outcome{}, err
		}
		if failSecondStep {
			return consumer.Outcome{}, errors.New("inventory service refused the reservation")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO dedup_test_reservation (change_id, sku_id, order_no, quantity, created_at)
			VALUES (?, 'sku-1', ?, -1, NOW(6))`, reserveChangeID(order), order)
		if err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	}))

	o, err := f.handle(h, f.orderMsg(t, ev, order))
	require.Error(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	orders, reservations := f.effects(t)
	assert.Equal(t, 0, orders, "the first step rolled back with the second")
	assert.Equal(t, 0, reservations)
	assert.Equal(t, 0, f.dedupRows(t, ev))

	assert.Equal(t, 0, f.ledger.Count(t, ev))

	failSecondStep = false
	f.requireOnceThenDuplicate(t, h, ev, order)
	orders, reservations = f.effects(t)
	assert.Equal(t, 1, orders)
	assert.Equal(t, 1, reservations)
	assert.Equal(t, 1, f.ledger.Count(t, ev), "applied once")
}

// deadlockWith starts a transaction heavier than the caller's (50 inserts) that locks order b, then waits for
// order a, which the caller's transaction holds: the caller's next statement on b deadlocks and InnoDB
// rolls back the caller's lighter transaction. It returns when the other transaction waits on a; the
// returned func waits for it to end (it rolls back).
func (f *fixture) deadlockWith(a, b string) (wait func()) {
	locked, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		other, err := f.db.Beginx()
		if err != nil {
			close(locked)
			return
		}
		defer func() { _ = other.Rollback() }()
		for i := range 50 {
			_, _ = other.Exec(`INSERT INTO dedup_test_reservation (change_id, sku_id, order_no, quantity, created_at)
				VALUES (?, 'sku', ?, 1, NOW(6))`, fmt.Sprintf("%s-bulk-%d", f.prefix, i), f.prefix+"-bulk")
		}
		_, _ = other.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, b)
		close(locked)
		_, _ = other.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, a)
	}()
	<-locked
	time.Sleep(300 * time.Millisecond) // let the other transaction queue on a's lock
	return func() { <-done }
}

// F15: a deadlock (1213) rolls the handler's whole transaction back, dedup row included. A handler that then
// retries its statement locally runs in a new transaction; that must neither commit on its own (autocommit)
// nor be committed by Dedup without its dedup row. The message is retried and takes effect once.
func TestF15_DeadlockRetriedInsideTheHandlerNeverCommitsWithoutTheDedupRow(t *testing.T) {
	f := newFixture(t)
	a, b := f.prefix+"-lock-a", f.prefix+"-lock-b"
	for _, o := range []string{a, b} {
		_, err := f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
			VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, o)
		require.NoError(t, err)
	}
	ev, order := f.prefix+"-e", f.prefix+"-1"
	first := true
	deadlocks := 0
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, a); err != nil {
			return consumer.Outcome{}, err
		}
		if first {
			first = false
			defer f.deadlockWith(a, b)()
		}
		var err error
		for range 3 { // the pitfall: a bounded local retry of the statement inside the same transaction
			_, err = tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, b)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock {
				deadlocks++
				continue
			}
			break
		}
		if err != nil {
			return consumer.Outcome{}, err
		}
		return handleOrderCreated(ctx, tx, d)
	})

	o, err := f.handle(h, f.orderMsg(t, ev, order))
	require.Equal(t, 1, deadlocks, "the scenario produced its deadlock")
	require.ErrorIs(t, err, dedup.ErrClaimLost)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	orders, reservations := f.effects(t)
	assert.Equal(t, 2, orders, "only the two lock rows: the order written after the deadlock did not commit")
	assert.Zero(t, reservations, "no reservation committed")
	assert.Equal(t, 0, f.dedupRows(t, ev))

	f.requireOnceThenDuplicate(t, h, ev, order)
	var n int
	require.NoError(t, f.db.Get(&n, `SELECT COUNT(*) FROM dedup_test_order WHERE order_no = ?`, order))
	assert.Equal(t, 1, n, "the event took effect once")
}

// F14: a 1062 on a business key (here: the same order number under a new event ID) is the handler's
// error, recognised by number through two layers of wrapping with MariaDB's wording; it is neither a
// duplicate nor acknowledged.
func TestF14_BusinessKey1062IsHandlerErrorNotDuplicate(t *testing.T) {
	f := newFixture(t)
	h := f.chain(t, handleOrderCreated)
	order := f.prefix + "-1"
	o, err := f.handle(h, f.orderMsg(t, f.prefix+"-e1", order))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)

	o, err = f.handle(h, f.orderMsg(t, f.prefix+"-e2", order))
	r := testenv.AnswerTo(t, o, err)
	require.Error(t, err)
	err = fmt.Errorf("consume: %w", err) // MariaDB's error, wrapped by the handler and once more here
	assert.Equal(t, consumer.KindRetry, o.Kind, "a 1062 on a business key is not a duplicate event")
	assert.Equal(t, rmq.ConsumeRetryLater, r.Result)
	key, dup := mysqlerr.DuplicateKey(err)
	assert.True(t, dup, "found by error number through the wrapping: %v", err)
	assert.Equal(t, "PRIMARY", key)
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me)
	assert.EqualValues(t, mysqlerr.ErDupEntry, me.Number)
	assert.Equal(t, 0, f.dedupRows(t, f.prefix+"-e2"))

	// The MySQL 8 wording of the same error (table-qualified key) is recognised the same way.
	mysql8 := fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", &mysql.MySQLError{Number: 1062,
		Message: "Duplicate entry 'x' for key 'orders.PRIMARY'"}))
	key, dup = mysqlerr.DuplicateKey(mysql8)
	assert.True(t, dup)
	assert.Equal(t, "PRIMARY", key)
}

func TestDedup_GroupsAreIndependent(t *testing.T) {
	f := newFixture(t)
	ev := f.prefix + "-e"
	var ran []string
	h := func(group string) consumer.Handler {
		g := *f
		g.group = group
		return g.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			ran = append(ran, d.Group)
			return consumer.Processed(), nil
		})
	}
	inventory, accounting := f.group+"-inventory", f.group+"-accounting"
	for _, g := range []string{inventory, accounting, inventory} {
		_, err := h(g).Handle(context.Background(), testenv.NewDelivery(g, f.orderMsg(t, ev, f.prefix+"-1")))
		require.NoError(t, err)
	}
	assert.Equal(t, []string{inventory, accounting}, ran, "each group processes the event once")
}

// F15 with S2: the handler's transaction A is rolled back by a deadlock and the handler retries its
// statement; meanwhile a duplicate delivery B of the same event claims the freed key, applies the effect
// and commits. A must not commit its own effect on the strength of B's row: the effect here (a counter) has
// no business key to catch it, so only Confirm's claim token stands between the event and a double effect.
func TestF15_S2_ClaimLostToAConcurrentDuplicateIsNotCommitted(t *testing.T) {
	f := newFixture(t)
	a, b, counter := f.prefix+"-lock-a", f.prefix+"-lock-b", f.prefix+"-counter"
	for _, o := range []string{a, b, counter} {
		_, err := f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
			VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, o)
		require.NoError(t, err)
	}
	ev := f.prefix + "-e"
	bump := func(ctx context.Context, tx *sqlx.Tx, order string) error {
		_, err := tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, order)
		return err
	}
	var h consumer.Handler
	var bOutcome consumer.Outcome
	h = f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetProperty("ROLE") == "B" {
			return consumer.Processed(), bump(ctx, tx, counter)
		}
		if err := bump(ctx, tx, a); err != nil {
			return consumer.Outcome{}, err
		}
		defer f.deadlockWith(a, b)()
		var err error
		for try := range 3 {
			err = bump(ctx, tx, b)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock {
				if try == 0 { // the duplicate runs while A's claim is gone
					dup := f.orderMsg(t, ev, f.prefix+"-1")
					dup.WithProperty("ROLE", "B")
					bOutcome, _ = f.handle(h, dup)
				}
				continue
			}
			break
		}
		if err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), bump(ctx, tx, counter)
	})

	o, err := f.handle(h, f.orderMsg(t, ev, f.prefix+"-1"))

	require.Equal(t, consumer.KindProcessed, bOutcome.Kind, "the duplicate claimed the freed key and committed")
	require.ErrorIs(t, err, dedup.ErrClaimLost, "A saw B's row, not its own")
	assert.Equal(t, consumer.KindRetry, o.Kind)
	var version int
	require.NoError(t, f.db.Get(&version, `SELECT version FROM dedup_test_order WHERE order_no = ?`, counter))
	assert.Equal(t, 2, version, "the event took effect once (B), not twice")

	o, err = f.handle(h, f.orderMsg(t, ev, f.prefix+"-1"))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind, "A's redelivery is a duplicate")
}

// F7: a handler that ignores its context is abandoned by middleware.Timeout at the deadline; its
// transaction is rolled back and its connection returned to the pool then, not when the handler finally
// returns, so hung handlers cannot starve healthy messages of connections. Once the abandoned handlers are
// released and have run to their end (business writes, Confirm, Commit attempt), nothing of theirs has
// committed.
func TestF7_AbandonedHandlerGivesItsConnectionBackAtTheDeadline(t *testing.T) {
	f := newFixture(t)
	f.db.SetMaxOpenConns(2)
	f.store = newStore(t, f.db) // its transaction pool (WithTxDSN) is bounded like db's
	release := make(chan struct{})
	var abandoned sync.WaitGroup // the hung deliveries' Dedup calls, which run on Timeout's goroutines
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	hangs := func(d *consumer.Delivery) bool { return strings.HasPrefix(d.EventID, f.prefix+"-hang") }
	awaitAbandoned := middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if hangs(d) {
				defer abandoned.Done()
			}
			return next.Handle(ctx, d)
		})
	})
	h := testenv.Must(middleware.Chain(dedup.Handle(f.ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if hangs(d) {
			<-release // hangs, ignoring ctx
		}
		return handleOrderCreated(ctx, tx, d)
	})), middleware.Classify(), eventID, middleware.Timeout(300*time.Millisecond), awaitAbandoned, testenv.Must(middleware.Dedup(f.store))))

	var hung []string
	for i := range 2 { // as many hung handlers as the pool has connections
		id := fmt.Sprintf("%s-hang-%d", f.prefix, i)
		hung = append(hung, id)
		abandoned.Add(1)
		o, err := f.handle(h, f.orderMsg(t, id, id))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, consumer.KindRetry, o.Kind)
	}
	require.Eventually(t, func() bool { return f.store.Protocol().(txproto.Pooled).TxStats().InUse == 0 }, 5*time.Second, 20*time.Millisecond,
		"the abandoned handlers' connections are back in the pool: %+v", f.store.Protocol().(txproto.Pooled).TxStats())

	o, err := f.handle(h, f.orderMsg(t, f.prefix+"-good", f.prefix+"-good"))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "a healthy message gets a connection")

	close(release)
	abandoned.Wait() // the abandoned handlers wrote what they could and Dedup tried to commit it
	orders, _ := f.effects(t)
	assert.Equal(t, 1, orders, "nothing of the abandoned handlers committed")
	for _, id := range hung {
		assert.Zero(t, f.ledger.Count(t, id), "abandoned %s has no effect", id)
		assert.Zero(t, f.dedupRows(t, id), "abandoned %s has no dedup row", id)
	}
	assert.Equal(t, 1, f.ledger.Count(t, f.prefix+"-good"))
}
