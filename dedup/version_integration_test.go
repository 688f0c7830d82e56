package dedup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// versionWorld is a chain on the real test database — Classify → EventID → Dedup → Version → handler — in a
// dedup scope of its own. The handler appends the event to the ledger (an effect without a unique key:
// an event applied twice shows twice), through the dedup transaction.
type versionWorld struct {
	db      *sqlx.DB
	store   *dedup.Store
	metrics *metrics.Metrics
	group   string
	prefix  string // aggregate and event IDs of this test start with it
	ledger  *testenv.Ledger
	h       consumer.Handler
}

func newVersionWorld(t *testing.T, cfg middleware.VersionConfig, handler dedup.TxHandler) *versionWorld {
	t.Helper()
	db := testenv.MySQL(t)
	store := newStore(t, db)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	w := &versionWorld{db: db, store: store, metrics: m, group: testenv.Unique("cg"), prefix: testenv.Unique("v")}
	w.ledger = testenv.NewLedger(t, db, w.prefix)
	if handler == nil {
		handler = func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			return consumer.Processed(), w.ledger.Append(ctx, tx, d.EventID)
		}
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	if cfg.AggregateType == "" {
		cfg.AggregateType = "order"
	}
	version, err := middleware.Version(store, cfg)
	require.NoError(t, err)
	w.h = testenv.Must(middleware.Chain(dedup.Handle(handler), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store)), version))
	return w
}

// send handles a new message (its own message ID) carrying event eventID of aggregate id at version, on
// delivery attempt+1, and reports the decision to the metrics as the consumer would for one message.
func (w *versionWorld) send(t *testing.T, eventID, id string, version int64, attempt int) consumer.Outcome {
	t.Helper()
	msg := w.message(eventID, id, version)
	msg.ReconsumeTimes = int32(attempt)
	d := testenv.NewDelivery(w.group, msg)
	d.MaxAttempts = 16
	o, err := w.h.Handle(context.Background(), d)
	require.NoError(t, err, "%s v%d", eventID, version)
	if o.Kind.Acknowledges() {
		w.metrics.Decided(d, consumer.Decision{Outcome: o, Chain: o})
	}
	return o
}

// stored is the aggregate_version row of id in this scope (0 when none) and the event that set it.
func (w *versionWorld) stored(t *testing.T, id string) (int64, string) {
	t.Helper()
	var row struct {
		Version int64  `db:"version"`
		EventID string `db:"event_id"`
	}
	err := w.db.Get(&row, `SELECT version, event_id FROM aggregate_version
		WHERE consumer_group = ? AND aggregate_type = 'order' AND aggregate_id = ?`, w.group, w.prefix+"-"+id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ""
	}
	require.NoError(t, err)
	return row.Version, row.EventID
}

// seed stores version for aggregate id, as if earlier events had set it.
func (w *versionWorld) seed(t *testing.T, id string, version int64) {
	t.Helper()
	_, err := w.db.Exec(`INSERT INTO aggregate_version (consumer_group, aggregate_type, aggregate_id, version, event_id, updated_at)
		VALUES (?, 'order', ?, ?, 'seed', UTC_TIMESTAMP(6))`, w.group, w.prefix+"-"+id, version)
	require.NoError(t, err)
}

// status is the result_status of the event's processed_event row ("" when none).
func (w *versionWorld) status(t *testing.T, eventID string) string {
	t.Helper()
	var s string
	err := w.db.Get(&s, `SELECT result_status FROM processed_event WHERE consumer_group = ? AND event_id = ?`,
		w.group, w.prefix+"-"+eventID)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return s
}

func (w *versionWorld) applied(t *testing.T, eventID string) int {
	t.Helper()
	return w.ledger.Count(t, w.prefix+"-"+eventID)
}

func (w *versionWorld) staleTotal() float64 {
	return testutil.ToFloat64(w.metrics.Stale.WithLabelValues(w.group, "ORDER"))
}

// S7: an old version arrives late (after newer ones were applied): the state keeps the newer version, the
// late event is acknowledged as stale, counted, writes nothing, and its processed_event row says STALE; a
// redelivery of it is then a duplicate, not a second stale.
func TestVersion_OldVersionArrivingLateIsStaleAndRecorded(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	assert.Equal(t, consumer.KindProcessed, w.send(t, "paid-1", "o-1", 1, 0).Kind)
	assert.Equal(t, consumer.KindRetry, w.send(t, "paid-3", "o-1", 3, 0).Kind, "v3 before v2: a gap, retried")
	assert.Equal(t, 0, w.applied(t, "paid-3"))
	assert.Equal(t, "", w.status(t, "paid-3"), "a retried gap leaves no dedup row")
	assert.Equal(t, consumer.KindProcessed, w.send(t, "paid-2", "o-1", 2, 0).Kind)
	assert.Equal(t, consumer.KindProcessed, w.send(t, "paid-3", "o-1", 3, 1).Kind, "the gap's retry applies")

	late := w.send(t, "late-2", "o-1", 2, 0)
	want := consumer.Stale(fmt.Sprintf("aggregate order %s-o-1: event version 2 ≤ stored 3", w.prefix))
	want.Committed = true // its STALE row committed (F39: no deadline overrules it)
	assert.Equal(t, want, late)
	v, by := w.stored(t, "o-1")
	assert.Equal(t, int64(3), v, "the state keeps the newer version")
	assert.Equal(t, w.prefix+"-paid-3", by)
	assert.Equal(t, 0, w.applied(t, "late-2"), "the late event writes nothing")
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "late-2"))
	assert.Equal(t, dedupsql.ResultSuccess, w.status(t, "paid-3"))
	assert.Equal(t, 1.0, w.staleTotal(), "rmqguard_stale_total")

	again := w.send(t, "late-2", "o-1", 2, 0)
	assert.Equal(t, consumer.KindDuplicate, again.Kind, "a replay of the stale event is a duplicate")
	assert.Equal(t, 1.0, w.staleTotal(), "not a second stale")
	w.ledger.RequireOncePerEvent(t, 3)
}

// S7, a handler's own stale: what it wrote before deciding is rolled back, the decision is recorded.
func TestVersion_HandlerStaleRollsBackItsWritesAndIsRecorded(t *testing.T) {
	var w *versionWorld
	w = newVersionWorld(t, middleware.VersionConfig{EventTypes: []string{"none"}},
		func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			if err := w.ledger.Append(ctx, tx, d.EventID); err != nil {
				return consumer.Outcome{}, err
			}
			return consumer.Stale("the row moved past this version"), nil
		})
	o := w.send(t, "e-1", "o-1", 4, 0)
	want := consumer.Stale("the row moved past this version")
	want.Committed = true // its STALE row committed (F39: no deadline overrules it)
	assert.Equal(t, want, o)
	assert.Equal(t, 0, w.applied(t, "e-1"), "the handler's write before its stale decision is rolled back")
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "e-1"))
	assert.Equal(t, consumer.KindDuplicate, w.send(t, "e-1", "o-1", 4, 0).Kind)
}

// F12 with versions that are monotonic but not dense (7 after nothing, 7 after 5): GapRetries none and
// GapApply. order-1: v7, then v5, then v7 again → state v7, v5 stale, the second v7 a duplicate; order-2:
// v5 before v7 applies both, in order.
func TestF12_MonotonicVersions_LateOldVersionIsStaleAndRepeatIsDuplicate(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{GapRetries: middleware.NoGapRetries, OnGap: middleware.GapApply}, nil)
	requireF12(t, w, false)
}

// F12 in strict mode (dense versions, gaps dead-lettered): order-1 stored at 6, order-2 at 4; v5 then v6
// then v7 applies all three in order.
func TestF12_StrictVersions_LateOldVersionIsStaleAndRepeatIsDuplicate(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	w.seed(t, "order-1", 6)
	w.seed(t, "order-2", 4)
	requireF12(t, w, true)

	o := w.send(t, "o2-v9", "order-2", 9, 3) // the default GapRetries
	assert.Equal(t, consumer.KindDeadLetter, o.Kind, "a gap that waited its retries")
	assert.Equal(t, causelabel.VersionGap, o.Cause)
	assert.Equal(t, "", w.status(t, "o2-v9"), "a dead letter leaves no dedup row")
	v, _ := w.stored(t, "order-2")
	assert.Equal(t, int64(7), v)
}

// requireF12 runs F12 on w: order-1 v7, v5, v7 again; then order-2 v5, v7 (dense: v5, v6, v7) in order.
func requireF12(t *testing.T, w *versionWorld, dense bool) {
	t.Helper()
	assert.Equal(t, consumer.KindProcessed, w.send(t, "o1-v7", "order-1", 7, 0).Kind)
	assert.Equal(t, consumer.KindStale, w.send(t, "o1-v5", "order-1", 5, 0).Kind)
	dup := w.send(t, "o1-v7", "order-1", 7, 0)
	assert.Equal(t, consumer.KindDuplicate, dup.Kind)
	assert.Equal(t, causelabel.Resend, dup.Cause)
	v, by := w.stored(t, "order-1")
	assert.Equal(t, int64(7), v, "order-1 stays at v7")
	assert.Equal(t, w.prefix+"-o1-v7", by)
	assert.Equal(t, 1, w.applied(t, "o1-v7"))
	assert.Equal(t, 0, w.applied(t, "o1-v5"))
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "o1-v5"))
	assert.Equal(t, 1.0, w.staleTotal())

	versions := []int64{5, 7}
	if dense {
		versions = []int64{5, 6, 7}
	}
	for _, version := range versions {
		ev := "o2-v" + strconv.FormatInt(version, 10)
		assert.Equal(t, consumer.KindProcessed, w.send(t, ev, "order-2", version, 0).Kind, ev)
		v, by := w.stored(t, "order-2")
		assert.Equal(t, version, v, "order-2 moves to v%d", version)
		assert.Equal(t, w.prefix+"-"+ev, by)
	}
	assert.Equal(t, consumer.KindDuplicate, w.send(t, "o2-v5", "order-2", 5, 0).Kind,
		"a v5 of order-2 coming again after v7 is a duplicate (processed), not stale")
	w.ledger.RequireOncePerEvent(t, 1+len(versions))
}

// versionedOrderTable is a business table of these tests that carries its own version column, for
// VersionConfig.Load. Rows are keyed by the test run, so runs never share them.
const versionedOrderTable = `CREATE TABLE IF NOT EXISTS test_versioned_order (
	run      VARCHAR(64)  NOT NULL,
	order_no VARCHAR(128) NOT NULL,
	status   VARCHAR(20)  NOT NULL,
	version  BIGINT       NOT NULL,
	PRIMARY KEY (run, order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// F12 with a user Load on a table that carries its own version column (strict mode): the handler's
// conditional UPDATE … WHERE version = event version − 1 moves the row; aggregate_version is not used.
func TestF12_LoadFromTheAggregatesOwnVersionColumn(t *testing.T) {
	db := testenv.MySQL(t)
	_, err := db.Exec(versionedOrderTable)
	require.NoError(t, err)
	var w *versionWorld
	run := func() string { return w.prefix }
	load := func(ctx context.Context, tx *sqlx.Tx, orderNo string) (int64, error) {
		var v int64
		err := tx.GetContext(ctx, &v, `SELECT version FROM test_versioned_order WHERE run = ? AND order_no = ? FOR UPDATE`, run(), orderNo)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return v, err
	}
	w = newVersionWorld(t, middleware.VersionConfig{Load: load},
		func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			res, err := tx.ExecContext(ctx, `UPDATE test_versioned_order SET version = ?, status = ?
				WHERE run = ? AND order_no = ? AND version = ?`, d.Version, "V"+strconv.FormatInt(d.Version, 10), run(), d.AggregateID, d.Version-1)
			if err != nil {
				return consumer.Outcome{}, err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return consumer.Outcome{}, fmt.Errorf("order %s not at version %d (%d rows, %v)", d.AggregateID, d.Version-1, n, err)
			}
			return consumer.Processed(), w.ledger.Append(ctx, tx, d.EventID)
		})
	for id, v := range map[string]int64{"order-1": 6, "order-2": 4} {
		_, err := db.Exec(`INSERT INTO test_versioned_order (run, order_no, status, version) VALUES (?, ?, 'NEW', ?)`, w.prefix, w.prefix+"-"+id, v)
		require.NoError(t, err)
	}
	row := func(id string) (v int64, status string) {
		require.NoError(t, db.QueryRow(`SELECT version, status FROM test_versioned_order WHERE run = ? AND order_no = ?`,
			w.prefix, w.prefix+"-"+id).Scan(&v, &status))
		return v, status
	}

	assert.Equal(t, consumer.KindProcessed, w.send(t, "o1-v7", "order-1", 7, 0).Kind)
	assert.Equal(t, consumer.KindStale, w.send(t, "o1-v5", "order-1", 5, 0).Kind)
	assert.Equal(t, consumer.KindDuplicate, w.send(t, "o1-v7", "order-1", 7, 0).Kind)
	v, status := row("order-1")
	assert.Equal(t, int64(7), v)
	assert.Equal(t, "V7", status)
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "o1-v5"))
	for _, version := range []int64{5, 6, 7} {
		assert.Equal(t, consumer.KindProcessed, w.send(t, "o2-v"+strconv.FormatInt(version, 10), "order-2", version, 0).Kind)
	}
	v, status = row("order-2")
	assert.Equal(t, int64(7), v)
	assert.Equal(t, "V7", status)
	var tableRows int
	require.NoError(t, db.Get(&tableRows, `SELECT COUNT(*) FROM aggregate_version WHERE consumer_group = ?`, w.group))
	assert.Zero(t, tableRows, "with Load, aggregate_version is not written")
	assert.Equal(t, 1.0, w.staleTotal())
	w.ledger.RequireOncePerEvent(t, 4)
}

// Concurrent events of one aggregate (distinct event IDs, one version) never both apply on one stored
// version: the row lock serialises them, for a known aggregate and for a new one (its placeholder row);
// every loser is stale (a loser told to retry, by a deadlock say, is stale on its redelivery).
func TestVersion_ConcurrentEventsOfOneAggregateApplyOneVersionOnce(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	w.seed(t, "old", 3)
	for _, c := range []struct {
		id      string
		version int64
	}{{"old", 4}, {"new", 1}} {
		const n = 8
		kinds := make([]consumer.Kind, n)
		msgs := make([]*primitive.MessageExt, n)
		for i := range msgs {
			msgs[i] = w.message(fmt.Sprintf("%s-e%d", c.id, i), c.id, c.version)
		}
		w.concurrently(msgs, kinds)
		byKind := map[consumer.Kind]int{}
		for i, k := range kinds {
			byKind[k]++
			if k == consumer.KindRetry {
				msgs[i].ReconsumeTimes = 1
				o, err := w.h.Handle(context.Background(), testenv.NewDelivery(w.group, msgs[i]))
				require.NoError(t, err)
				assert.Equal(t, consumer.KindStale, o.Kind, "%s: a retried loser is stale on its redelivery", c.id)
			}
		}
		assert.Equal(t, 1, byKind[consumer.KindProcessed], "%s: one event applies version %d: %v", c.id, c.version, byKind)
		assert.Equal(t, n, byKind[consumer.KindProcessed]+byKind[consumer.KindStale]+byKind[consumer.KindRetry], "%s: %v", c.id, byKind)
		v, _ := w.stored(t, c.id)
		assert.Equal(t, c.version, v)
		var applied int
		require.NoError(t, w.db.Get(&applied, `SELECT COUNT(*) FROM `+testenv.LedgerTable+` WHERE run = ? AND event_id LIKE ?`,
			w.prefix, w.prefix+"-"+c.id+"-%"))
		assert.Equal(t, 1, applied, "%s: one effect", c.id)
	}
}

// First events of different new aggregates handled at once all apply: reading the version takes no gap
// lock, so their inserts do not deadlock (a SELECT … FOR UPDATE of the missing rows made most of 16 fail
// with 1213 and spend an attempt).
func TestVersion_FirstEventsOfDifferentNewAggregatesDoNotDeadlock(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	const n = 16
	msgs := make([]*primitive.MessageExt, n)
	for i := range msgs {
		msgs[i] = w.message(fmt.Sprintf("e%d", i), fmt.Sprintf("o%02d", i), 1)
	}
	kinds := make([]consumer.Kind, n)
	w.concurrently(msgs, kinds)
	for i, k := range kinds {
		assert.Equal(t, consumer.KindProcessed, k, "aggregate o%02d", i)
		v, _ := w.stored(t, fmt.Sprintf("o%02d", i))
		assert.Equal(t, int64(1), v)
	}
	w.ledger.RequireOncePerEvent(t, n)
}

// message is a new message carrying event eventID of aggregate id at version (IDs prefixed by the run).
func (w *versionWorld) message(eventID, id string, version int64) *primitive.MessageExt {
	msg := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
	msg.WithProperty("EVENT_ID", w.prefix+"-"+eventID)
	msg.WithProperty("AGGREGATE_ID", w.prefix+"-"+id)
	msg.WithProperty("AGGREGATE_VERSION", strconv.FormatInt(version, 10))
	return msg
}

// concurrently handles msgs at once, one goroutine each, and stores each outcome's kind in kinds.
func (w *versionWorld) concurrently(msgs []*primitive.MessageExt, kinds []consumer.Kind) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, msg := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o, _ := w.h.Handle(context.Background(), testenv.NewDelivery(w.group, msg))
			kinds[i] = o.Kind
		}()
	}
	close(start)
	wg.Wait()
}

// The store's aggregate helpers on their own: a missing aggregate reads 0, also on a session that read a
// stored version before (and its placeholder is gone with the rollback), an advance from a version the row is not at changes nothing (ErrVersionMoved, transient),
// keys the table cannot hold are permanent, and RecordStale twice keeps one STALE row (the second says ErrDuplicate).
func TestAggregateVersion_ReadAdvanceAndRecordStale(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	// One connection: the read of a new aggregate follows, on the same session, reads that set
	// LAST_INSERT_ID to a stored version; it must still read 0.
	w.db.SetMaxOpenConns(1)
	ctx := context.Background()
	a := dedup.Aggregate{Scope: w.group, Type: "order", ID: w.prefix + "-o-1"}
	inTx := func(f func(tx *sqlx.Tx)) {
		tx, err := w.db.BeginTxx(ctx, nil)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Commit()) }()
		f(tx)
	}
	inTx(func(tx *sqlx.Tx) {
		v, err := w.store.AggregateVersionOf(ctx, tx, a)
		require.NoError(t, err)
		assert.Zero(t, v)
		require.NoError(t, w.store.AdvanceAggregateOf(ctx, tx, a, 0, 3, "e-3"))
	})
	inTx(func(tx *sqlx.Tx) {
		v, err := w.store.AggregateVersionOf(ctx, tx, a)
		require.NoError(t, err)
		assert.Equal(t, int64(3), v)
		err = w.store.AdvanceAggregateOf(ctx, tx, a, 2, 4, "e-4")
		require.ErrorIs(t, err, dedup.ErrVersionMoved)
		assert.Equal(t, retry.ClassTransient, retry.Classify(err))
		assert.Error(t, w.store.AdvanceAggregateOf(ctx, tx, a, 3, 3, "e-3"), "the version must move up")
	})
	v, by := w.stored(t, "o-1")
	assert.Equal(t, int64(3), v)
	assert.Equal(t, "e-3", by)

	b := dedup.Aggregate{Scope: w.group, Type: "order", ID: w.prefix + "-o-2"}
	tx, err := w.db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	v, err = w.store.AggregateVersionOf(ctx, tx, b)
	require.NoError(t, err)
	assert.Zero(t, v)
	require.NoError(t, tx.Rollback())
	var rows int
	require.NoError(t, w.db.Get(&rows, `SELECT COUNT(*) FROM aggregate_version WHERE consumer_group = ? AND aggregate_id = ?`, w.group, b.ID))
	assert.Zero(t, rows, "the placeholder row of a new aggregate goes with the rollback")

	long := a
	long.ID = strings.Repeat("x", dedup.MaxAggregateIDLength+1)
	inTx(func(tx *sqlx.Tx) {
		_, err := w.store.AggregateVersionOf(ctx, tx, long)
		assert.True(t, retry.Classify(err) == retry.ClassPermanent, "%v", err)
	})

	d := testenv.NewDelivery(w.group, w.message("stale-1", "o-1", 1))
	d.EventID = w.prefix + "-stale-1"
	require.NoError(t, w.store.Protocol().RecordStale(ctx, d))
	require.ErrorIs(t, w.store.Protocol().RecordStale(ctx, d), dedup.ErrDuplicate, "a second record (a concurrent delivery) finds the first")
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "stale-1"))
}

// Without a loader, Version refuses a database without aggregate_version at construction (not on every
// message, which would retry them into the DLQ), naming the fix.
func TestVersion_MissingAggregateTableIsRefusedAtConstruction(t *testing.T) {
	db := scratchDB(t)
	_, err := dedup.Migrate(context.Background(), db.DB)
	require.NoError(t, err)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	_, err = middleware.Version(store, middleware.VersionConfig{AggregateType: "order"})
	require.NoError(t, err, "the migrated schema has it")

	_, err = db.Exec(`DROP TABLE aggregate_version`)
	require.NoError(t, err)
	_, err = middleware.Version(store, middleware.VersionConfig{AggregateType: "order"})
	require.ErrorIs(t, err, dedup.ErrSchema)
	assert.Contains(t, err.Error(), "aggregate_version is missing from the current database; fix: run dedup.Migrate")
	load := func(context.Context, *sqlx.Tx, string) (int64, error) { return 0, nil }
	_, err = middleware.Version(store, middleware.VersionConfig{AggregateType: "order", Load: load})
	assert.NoError(t, err, "with a loader the table is not needed")
}

// S7: when the stale decision cannot be recorded, the message is retried (never acknowledged without its
// STALE row), and the stale event still wrote nothing; the redelivery records it. The insert is made to
// fail by a trigger, on a database of the test's own.
func TestVersion_FailureToRecordStaleIsRetried(t *testing.T) {
	db := scratchDB(t)
	_, err := dedup.Migrate(context.Background(), db.DB)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TRIGGER refuse_stale BEFORE INSERT ON processed_event FOR EACH ROW
		BEGIN IF NEW.result_status = 'STALE' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stale refused'; END IF; END`)
	require.NoError(t, err)
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	w.db = db
	w.store, err = dedup.NewStore(db)
	require.NoError(t, err)
	version, err := middleware.Version(w.store, middleware.VersionConfig{AggregateType: "order"})
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	w.h = testenv.Must(middleware.Chain(dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(w.store)), version))
	w.seed(t, "o-1", 3)

	msg := w.message("late", "o-1", 2)
	o, err := w.h.Handle(context.Background(), testenv.NewDelivery(w.group, msg))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decided stale")
	assert.Equal(t, consumer.KindRetry, o.Kind, "not acknowledged")
	assert.Equal(t, "", w.status(t, "late"))

	_, err = db.Exec(`DROP TRIGGER refuse_stale`)
	require.NoError(t, err)
	msg.ReconsumeTimes = 1
	o, err = w.h.Handle(context.Background(), testenv.NewDelivery(w.group, msg))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindStale, o.Kind)
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "late"))
}

// F12 (table mode): a handler that finds its event's effect already there (a compensation job applied the
// action first: dedup.ActionAlreadyApplied) returns consumer.Duplicate, which Dedup commits with the dedup
// row. The event has taken effect, so the aggregate is at its version: the next version applies, it is
// not a gap (which strict mode would retry and then dead-letter).
func TestF12_HandlersOwnDuplicateMovesTheStoredVersion(t *testing.T) {
	var w *versionWorld
	w = newVersionWorld(t, middleware.VersionConfig{},
		func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.Version == 1 {
				return consumer.Duplicate(), nil // the effect exists already (e.g. ActionAlreadyApplied)
			}
			return consumer.Processed(), w.ledger.Append(ctx, tx, d.EventID)
		})
	assert.Equal(t, consumer.KindDuplicate, w.send(t, "e-1", "o-1", 1, 0).Kind)
	assert.Equal(t, dedupsql.ResultSuccess, w.status(t, "e-1"), "the handler's duplicate commits the dedup row")
	v, by := w.stored(t, "o-1")
	assert.Equal(t, int64(1), v, "the event took effect: the aggregate is at its version")
	assert.Equal(t, w.prefix+"-e-1", by)

	assert.Equal(t, consumer.KindProcessed, w.send(t, "e-2", "o-1", 2, 0).Kind, "v2 follows v1: no gap")
	w.ledger.RequireOncePerEvent(t, 1)
}

// S7 and S2 at once: two deliveries of one stale event handled concurrently. The second waits for the
// first's claim, is handled after the first rolled back, and records its decision after the first did:
// the event is stale once and a duplicate once (rmqguard_stale_total counts the event once), never two
// stales. The loader holds each delivery long enough for the other to queue up behind its row. The
// duplicate's cause is read from the STALE row (F41): the same message, a redelivery.
func TestVersion_ConcurrentDeliveriesOfOneStaleEventCountOneStale(t *testing.T) {
	entered := make(chan struct{}, 2)
	load := func(ctx context.Context, _ *sqlx.Tx, _ string) (int64, error) {
		entered <- struct{}{}
		time.Sleep(300 * time.Millisecond) // the other delivery reaches its claim (or its record) meanwhile
		return 7, nil
	}
	w := newVersionWorld(t, middleware.VersionConfig{Load: load}, nil)
	msg := w.message("late-5", "o-1", 5)
	kinds := make([]consumer.Kind, 2)
	causes := make([]string, 2)
	var wg sync.WaitGroup
	for i := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				<-entered // the first delivery holds its claim
			}
			d := testenv.NewDelivery(w.group, msg)
			d.MaxAttempts = 16
			o, err := w.h.Handle(context.Background(), d)
			assert.NoError(t, err)
			kinds[i], causes[i] = o.Kind, o.Cause
			if o.Kind.Acknowledges() {
				w.metrics.Decided(d, consumer.Decision{Outcome: o, Chain: o})
			}
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []consumer.Kind{consumer.KindStale, consumer.KindDuplicate}, kinds)
	for i, k := range kinds {
		if k == consumer.KindDuplicate {
			assert.Equal(t, causelabel.Redelivery, causes[i], "the STALE row holds this message's ID")
		}
	}
	assert.Equal(t, 1.0, w.staleTotal(), "one event, one stale")
	assert.Equal(t, dedupsql.ResultStale, w.status(t, "late-5"))
}

// F15 with Version (table mode): MySQL rolls the transaction back underneath the handler (a deadlock;
// here a ROLLBACK statement stands in for it), the handler carries on in a new transaction and returns
// Processed. Neither its write nor the version advance may commit without the dedup row: the message is
// retried, the stored version and the ledger are unchanged, and the redelivery applies the event once.
func TestF15_RollbackUnderTheHandlerWithVersionCommitsNothing(t *testing.T) {
	var w *versionWorld
	underneath := true
	w = newVersionWorld(t, middleware.VersionConfig{},
		func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			if underneath {
				if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
					return consumer.Outcome{}, err
				}
			}
			return consumer.Processed(), w.ledger.Append(ctx, tx, d.EventID)
		})
	w.seed(t, "old", 3)
	for _, c := range []struct {
		id      string
		version int64
	}{{"old", 4}, {"new", 1}} {
		underneath = true
		msg := w.message("e-"+c.id, c.id, c.version)
		d := testenv.NewDelivery(w.group, msg)
		d.MaxAttempts = 16
		o, err := w.h.Handle(context.Background(), d)
		assert.Error(t, err, c.id)
		assert.Equal(t, consumer.KindRetry, o.Kind, "%s: %v", c.id, o)
		v, _ := w.stored(t, c.id)
		assert.Equal(t, c.version-1, v, "%s: the version did not move", c.id)
		assert.Zero(t, w.applied(t, "e-"+c.id), c.id)
		assert.Equal(t, "", w.status(t, "e-"+c.id), c.id)

		underneath = false
		msg.ReconsumeTimes = 1
		o, err = w.h.Handle(context.Background(), testenv.NewDelivery(w.group, msg))
		require.NoError(t, err)
		assert.Equal(t, consumer.KindProcessed, o.Kind, c.id)
		v, _ = w.stored(t, c.id)
		assert.Equal(t, c.version, v, c.id)
	}
	w.ledger.RequireOncePerEvent(t, 2)
}

// F12, a gap whose earlier event arrives at the same moment: stored 1, v3 and v2 handled at once. Whatever
// the order the row lock gives them, v2 applies, v3 is applied or retried (a gap) and then applies on its
// redelivery: the aggregate ends at v3 with each event applied once.
func TestF12_GapAndItsMissingEventAtOnce(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	for round := range 5 {
		id := fmt.Sprintf("o-%d", round)
		w.seed(t, id, 1)
		msgs := []*primitive.MessageExt{w.message(id+"-v3", id, 3), w.message(id+"-v2", id, 2)}
		kinds := make([]consumer.Kind, 2)
		w.concurrently(msgs, kinds)
		assert.Equal(t, consumer.KindProcessed, kinds[1], "%s: v2 applies", id)
		if kinds[0] == consumer.KindRetry {
			msgs[0].ReconsumeTimes = 1
			o, err := w.h.Handle(context.Background(), testenv.NewDelivery(w.group, msgs[0]))
			require.NoError(t, err)
			kinds[0] = o.Kind
		}
		assert.Equal(t, consumer.KindProcessed, kinds[0], "%s: v3 applies, at once or on its redelivery", id)
		v, by := w.stored(t, id)
		assert.Equal(t, int64(3), v, id)
		assert.Equal(t, w.prefix+"-"+id+"-v3", by)
	}
	w.ledger.RequireOncePerEvent(t, 10)
}
