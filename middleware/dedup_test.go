package middleware_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// The tests in this file check the Dedup middleware's commit and rollback decisions on a fake driver, for
// paths a real server makes hard to reach (begin and commit failures). The acceptance cases themselves run
// on the real MariaDB in dedup/integration_test.go.

// fakeDB is a database/sql driver that records transactions and answers the dedup insert with claimErr.
// It stands in for MySQL so the Dedup middleware's commit/rollback decisions can be checked without a server.
type fakeDB struct {
	mu        sync.Mutex
	beginErr  error
	claimErr  error
	commitErr error
	claimLost bool // the confirm query finds no processed_event row (the tx was rolled back under the handler)
	begins    int
	commits   int
	rollbacks int
	inserts   [][]driver.NamedValue
}

func (f *fakeDB) Connect(context.Context) (driver.Conn, error) { return &fakeConn{db: f}, nil }
func (f *fakeDB) Driver() driver.Driver                        { return nil }

func (f *fakeDB) counts() (begins, commits, rollbacks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.begins, f.commits, f.rollbacks
}

type fakeConn struct{ db *fakeDB }

func (c *fakeConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("fake: prepare not supported")
}
func (c *fakeConn) Close() error { return nil }
func (c *fakeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	if c.db.beginErr != nil {
		return nil, c.db.beginErr
	}
	c.db.begins++
	return &fakeTx{db: c.db}, nil
}

func (c *fakeConn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	if strings.Contains(query, "INSERT INTO processed_event") {
		c.db.inserts = append(c.db.inserts, args)
		if c.db.claimErr != nil {
			return nil, c.db.claimErr
		}
	}
	return driver.RowsAffected(1), nil
}

// QueryContext answers NewStore's schema check with processed_event as migrated, the dedup store's
// confirm query (SELECT COUNT(*) FROM processed_event …) with 1, or 0 when claimLost is set, and the
// read-back of a COMMIT whose answer was lost (… LOCK IN SHARE MODE) with 0 when commitErr is set (the
// COMMIT failed: nothing committed).
func (c *fakeConn) QueryContext(_ context.Context, query string, _ []driver.NamedValue) (driver.Rows, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	switch {
	case strings.Contains(query, "information_schema.COLUMNS"):
		t := &tableRows{cols: []string{"COLUMN_NAME", "DATA_TYPE", "COLUMN_TYPE", "COLLATION_NAME"}}
		for _, col := range []string{"consumer_group", "event_id", "event_type", "aggregate_id", "topic", "msg_id",
			"consumed_at", "result_status", "claim_token"} {
			t.rows = append(t.rows, []driver.Value{col, "varchar", "varchar(255)", "utf8mb4_bin"})
		}
		return t, nil
	case strings.Contains(query, "information_schema.STATISTICS"):
		return &tableRows{cols: []string{"COLUMN_NAME"}, rows: [][]driver.Value{{"consumer_group"}, {"event_id"}}}, nil
	}
	if !strings.Contains(query, "FROM processed_event") {
		return nil, errors.New("fake: unexpected query " + query)
	}
	n := int64(1)
	if c.db.claimLost || (strings.Contains(query, "LOCK IN SHARE MODE") && c.db.commitErr != nil) {
		n = 0
	}
	return &countRows{n: n}, nil
}

// countRows is a one-row, one-column result.
type countRows struct {
	n    int64
	done bool
}

func (r *countRows) Columns() []string { return []string{"COUNT(*)"} }
func (r *countRows) Close() error      { return nil }
func (r *countRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = r.n
	return nil
}

// tableRows is a fixed result set.
type tableRows struct {
	cols []string
	rows [][]driver.Value
}

func (r *tableRows) Columns() []string { return r.cols }
func (r *tableRows) Close() error      { return nil }
func (r *tableRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

type fakeTx struct{ db *fakeDB }

func (t *fakeTx) Commit() error {
	t.db.mu.Lock()
	defer t.db.mu.Unlock()
	t.db.commits++
	return t.db.commitErr
}

func (t *fakeTx) Rollback() error {
	t.db.mu.Lock()
	defer t.db.mu.Unlock()
	t.db.rollbacks++
	return nil
}

// newDedup returns the fake database and the Dedup middleware on a Store over it.
func newDedup(t *testing.T) (*fakeDB, middleware.Middleware) {
	t.Helper()
	f := &fakeDB{}
	db := sqlx.NewDb(sql.OpenDB(f), "mysql")
	t.Cleanup(func() { _ = db.Close() })
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	return f, testenv.Must(middleware.Dedup(store))
}

// identified is a delivery whose EventID has been extracted.
func identified(id string) *consumer.Delivery {
	d := delivery("ORDER", "", map[string]string{"EVENT_ID": id})
	d.EventID = id
	return d
}

// countingHandler returns o, err and counts its calls; it records whether the dedup tx was in its context.
type countingHandler struct {
	calls int
	sawTx bool
	o     consumer.Outcome
	err   error
}

func (h *countingHandler) handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	h.calls++
	_, h.sawTx = dedup.TxFromContext(ctx)
	return h.o, h.err
}

func TestDedupFakeDB_ProcessedCommits(t *testing.T) {
	f, mw := newDedup(t)
	h := &countingHandler{o: consumer.Processed()}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, 1, h.calls)
	assert.True(t, h.sawTx, "the handler writes through the dedup transaction")
	begins, commits, rollbacks := f.counts()
	assert.Equal(t, [3]int{1, 1, 0}, [3]int{begins, commits, rollbacks})
	require.Len(t, f.inserts, 1)
	assert.Equal(t, "cg", f.inserts[0][0].Value, "the key is scoped by consumer group")
	assert.Equal(t, "e-1", f.inserts[0][1].Value)
}

func TestDedupFakeDB_DuplicateKeyOnClaimIsDuplicateWithoutRunningTheHandler(t *testing.T) {
	f, mw := newDedup(t)
	f.claimErr = &mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'cg-e-1' for key 'processed_event.PRIMARY'"}
	h := &countingHandler{o: consumer.Processed()}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind)
	assert.Equal(t, rmq.ConsumeSuccess, testenv.AnswerTo(t, o, err).Result)
	assert.Equal(t, 0, h.calls, "a duplicate never runs the business handler again")
	_, commits, rollbacks := f.counts()
	assert.Equal(t, 0, commits)
	assert.Equal(t, 1, rollbacks)
}

func TestDedupFakeDB_HandlerErrorRollsBackAndRetries(t *testing.T) {
	f, mw := newDedup(t)
	cause := errors.New("second step failed")
	h := &countingHandler{err: cause}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.ErrorIs(t, err, cause)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	_, commits, rollbacks := f.counts()
	assert.Equal(t, 0, commits, "a failed handler leaves no dedup row")
	assert.Equal(t, 1, rollbacks)
}

func TestDedupFakeDB_ErrorWithProcessedOutcomeStillRollsBack(t *testing.T) {
	f, mw := newDedup(t)
	h := &countingHandler{o: consumer.Processed(), err: errors.New("late failure")}

	_, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.Error(t, err)
	_, commits, rollbacks := f.counts()
	assert.Equal(t, 0, commits)
	assert.Equal(t, 1, rollbacks)
}

func TestDedupFakeDB_StaleRollsBackAndIsAcknowledged(t *testing.T) {
	f, mw := newDedup(t)
	h := &countingHandler{o: consumer.Stale("v5 < v7")}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-5"))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindStale, o.Kind)
	begins, commits, rollbacks := f.counts()
	assert.Equal(t, 1, rollbacks, "the message's transaction: a stale event writes nothing")
	assert.Equal(t, 2, begins, "the message's transaction, then the STALE row's own")
	assert.Equal(t, 1, commits, "the STALE row's own transaction")
}

func TestDedupFakeDB_UnsetOutcomeRollsBack(t *testing.T) {
	f, mw := newDedup(t)
	h := &countingHandler{}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.NoError(t, err)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	_, commits, _ := f.counts()
	assert.Equal(t, 0, commits)
}

func TestDedupFakeDB_DeadlockOnClaimIsTransientNotDuplicate(t *testing.T) {
	f, mw := newDedup(t)
	f.claimErr = &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	h := &countingHandler{o: consumer.Processed()}

	o, err := middleware.Classify().Wrap(mw.Wrap(consumer.HandlerFunc(h.handle))).Handle(context.Background(), identified("e-1"))

	require.Error(t, err)
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
	assert.Equal(t, consumer.KindRetry, o.Kind, "never duplicate, never DLQ")
	assert.Equal(t, 0, h.calls)
	_, commits, _ := f.counts()
	assert.Equal(t, 0, commits)
}

func TestDedupFakeDB_CommitFailureIsNeverAcknowledged(t *testing.T) {
	f, mw := newDedup(t)
	f.commitErr = mysql.ErrInvalidConn
	h := &countingHandler{o: consumer.Processed()}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.ErrorIs(t, err, mysql.ErrInvalidConn)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err), "a lost connection at COMMIT is the store's failure, not the message's")
}

// F15: a deadlock inside the handler rolls the whole transaction back, dedup row included; a handler that
// retried its statement would then "succeed" in a new transaction. Dedup notices the lost row, does not
// commit, and retries the message.
func TestDedupFakeDB_ClaimLostUnderTheHandlerIsNotCommitted(t *testing.T) {
	f, mw := newDedup(t)
	f.claimLost = true
	h := &countingHandler{o: consumer.Processed()}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.ErrorIs(t, err, dedup.ErrClaimLost)
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	_, commits, rollbacks := f.counts()
	assert.Zero(t, commits)
	assert.Equal(t, 1, rollbacks)
}

func TestDedupFakeDB_BeginFailureDoesNotRunTheHandler(t *testing.T) {
	f, mw := newDedup(t)
	f.beginErr = driver.ErrBadConn
	h := &countingHandler{o: consumer.Processed()}

	o, err := mw.Wrap(consumer.HandlerFunc(h.handle)).Handle(context.Background(), identified("e-1"))

	require.Error(t, err)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	assert.Equal(t, 0, h.calls)
}

func TestDedupFakeDB_MissingEventIDIsPermanentAndUnidentifiable(t *testing.T) {
	f, mw := newDedup(t)
	h := &countingHandler{o: consumer.Processed()}

	o, err := middleware.Classify().Wrap(mw.Wrap(consumer.HandlerFunc(h.handle))).Handle(context.Background(), delivery("ORDER", "", nil))

	require.ErrorIs(t, err, middleware.ErrUnidentifiable)
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, 0, h.calls)
	begins, _, _ := f.counts()
	assert.Equal(t, 0, begins, "no transaction is opened for a message without an event ID")
}

func TestDedupFakeDB_PanicRollsBackTheTransaction(t *testing.T) {
	f, mw := newDedup(t)
	panicking := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { panic("handler bug") }

	// Composed by hand: Chain would refuse Dedup without EventID, and the delivery is identified already.
	o, err := middleware.Recover(zap.NewNop()).Wrap(mw.Wrap(consumer.HandlerFunc(panicking))).Handle(context.Background(), identified("p-1"))

	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	_, commits, rollbacks := f.counts()
	assert.Equal(t, 0, commits)
	assert.Equal(t, 1, rollbacks, "the deferred rollback runs while the panic unwinds")
}

func TestDedupHandle_WithoutDedupIsErrNoTx(t *testing.T) {
	called := false
	h := dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		called = true
		return consumer.Processed(), nil
	})

	o, err := h.Handle(context.Background(), identified("e-1"))

	require.ErrorIs(t, err, dedup.ErrNoTx)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	assert.False(t, called)
}
