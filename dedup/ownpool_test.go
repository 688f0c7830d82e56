package dedup_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
)

// oneConnStore replaces f's store by one on its own transaction pool (dedup.WithTxDSN(dsn)) bounded to a
// single connection, so that every message of the test runs on the same connection.
func oneConnStore(t *testing.T, f *fixture, dsn string) {
	t.Helper()
	one, err := sqlx.Open("mysql", testenv.MySQLDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = one.Close() })
	one.SetMaxOpenConns(1)
	f.store, err = dedup.NewStore(one, dedup.WithTxDSN(dsn))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.store.Close()) })
}

// orderRows is the number of committed orders rows with order number no.
func (f *fixture) orderRows(t *testing.T, no string) int {
	t.Helper()
	var n int
	require.NoError(t, f.db.Get(&n, `SELECT COUNT(*) FROM dedup_test_order WHERE order_no = ?`, no))
	return n
}

// F15 on the store's own pool: a handler (or a procedure it CALLs) that turns autocommit on must not leave
// the pooled connection with autocommit on. Otherwise the next message on that connection, after MySQL
// rolled its transaction back underneath the handler (a ROLLBACK stands in for a deadlock), commits each of
// the handler's later statements by itself: Confirm then finds the row gone (ErrClaimLost) but the effect
// is already durable without its dedup row.
func TestOwnPool_HandlerThatTurnsAutocommitOnDoesNotPoisonIt(t *testing.T) {
	f := newFixture(t)
	oneConnStore(t, f, testenv.MySQLDSN())
	ev1, ev2 := f.prefix+"-e1", f.prefix+"-e2"
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.EventID {
		case ev1:
			if _, err := tx.ExecContext(ctx, "SET autocommit = 1"); err != nil {
				return consumer.Outcome{}, err
			}
		case ev2:
			if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
				return consumer.Outcome{}, err
			}
		}
		return handleOrderCreated(ctx, tx, d)
	})
	o, err := f.handle(h, f.orderMsg(t, ev1, f.prefix+"-1"))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)

	_, err = f.handle(h, f.orderMsg(t, ev2, f.prefix+"-2"))
	require.ErrorIs(t, err, dedup.ErrClaimLost)
	assert.Equal(t, 0, f.dedupRows(t, ev2))
	assert.Equal(t, 0, f.orderRows(t, f.prefix+"-2"),
		"the order written after the rollback committed without its dedup row: the pooled connection kept autocommit on")
}

// F15 on the store's own pool with a DSN that allows several statements per query (multiStatements=true):
// the query "DO 0; ROLLBACK" starts like plain DML, so it raises no doubt, yet it ends the transaction and
// drops the dedup row; the handler's writes after it would commit without the row and Confirm would not
// look. Whatever the store does with such a DSN (refuse it, or not let it through), an effect never commits
// without its dedup row.
func TestOwnPool_MultiStatementQueryCannotHideARollback(t *testing.T) {
	f := newFixture(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	cfg.MultiStatements = true
	oneConnStore(t, f, cfg.FormatDSN())
	ev, order := f.prefix+"-e", f.prefix+"-1"
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := tx.ExecContext(ctx, "DO 0; ROLLBACK"); err != nil {
			return consumer.Outcome{}, err
		}
		return handleOrderCreated(ctx, tx, d)
	})
	o, err := f.handle(h, f.orderMsg(t, ev, order))
	assert.Equal(t, f.dedupRows(t, ev), f.orderRows(t, order),
		"the effect committed without its dedup row (outcome %s, err %v)", o.Kind, err)
	assert.NotEqual(t, consumer.KindProcessed, o.Kind, "a transaction that lost its row is not processed")
}

// The store's own pool must run on the database db holds: a dsn naming another database (the demo
// database rmqguard instead of rmqguard_test, a copy-paste slip) would put the claims and the handler's
// writes in one database while Processed, RecordStale, DuplicateCause and Purge read and write the other,
// so a stale event could also be processed and a purge would never reach the claims. NewStore refuses it.
func TestNewStore_WithTxDSNOnAnotherDatabaseIsRefused(t *testing.T) {
	db := businessDB(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	other := "rmqguard"
	if cfg.DBName == other {
		other = "rmqguard_test"
	}
	cfg.DBName = other
	store, err := dedup.NewStore(db, dedup.WithTxDSN(cfg.FormatDSN()))
	if err == nil {
		_ = store.Close()
	}
	require.Error(t, err, "a transaction pool on database %s accepted for a store on another one", other)
	assert.Contains(t, err.Error(), "WithTxDSN")
}

// NewStore that fails (here an invalid option after WithTxDSN) must close the transaction pool it opened:
// sql.OpenDB starts a goroutine per pool that only Close stops.
func TestNewStore_FailureClosesItsOwnPool(t *testing.T) {
	db := businessDB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	_, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()), dedup.WithScope(""))
	require.ErrorContains(t, err, "WithScope")
	// WithTxDSN given twice: whether refused or the second one wins, the first pool must not outlive Close.
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()), dedup.WithTxDSN(testenv.MySQLDSN()))
	if err == nil {
		require.NoError(t, store.Close())
	}
}

// F7 on the store's own pool, with a handler that is blocked inside a statement run without its context
// (tx.Exec, not tx.ExecContext(ctx, …)) waiting for a row lock another transaction holds: at the deadline
// the transaction must still be rolled back and its connection returned to the pool, not when the lock wait
// ends (innodb_lock_wait_timeout, 50 s by default; 20 s on this test's pool).
func TestOwnPool_HandlerBlockedInAStatementWithoutItsContextGivesItsConnectionBack(t *testing.T) {
	f := newFixture(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "20"}
	oneConnStore(t, f, cfg.FormatDSN())
	interruptible, err := dedup.TxConnInterruptible(context.Background(), f.store)
	require.NoError(t, err)
	require.True(t, interruptible, "the pool's connection is interrupted at the deadline by the pool, not watched by the driver")
	locked := f.prefix + "-locked"
	_, err = f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, locked)
	require.NoError(t, err)
	holder, err := f.db.Beginx()
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, locked)
	require.NoError(t, err)

	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	var abandoned sync.WaitGroup
	abandoned.Add(1)
	h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		defer abandoned.Done()
		if _, err := tx.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, locked); err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	}), middleware.Classify(), eventID, middleware.Timeout(300*time.Millisecond), testenv.Must(middleware.Dedup(f.store))))

	ev := f.prefix + "-e"
	o, err := f.handle(h, f.orderMsg(t, ev, ev))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, consumer.KindRetry, o.Kind)
	assert.Eventually(t, func() bool { return f.store.Protocol().(txproto.Pooled).TxStats().InUse == 0 }, 5*time.Second, 20*time.Millisecond,
		"the connection of the transaction whose context ended is still in use: %+v", f.store.Protocol().(txproto.Pooled).TxStats())
	require.NoError(t, holder.Rollback())
	abandoned.Wait()
	assert.Equal(t, 0, f.dedupRows(t, ev))
	var version int
	require.NoError(t, f.db.Get(&version, `SELECT version FROM dedup_test_order WHERE order_no = ?`, locked))
	assert.Equal(t, 1, version, "the abandoned handler's update did not commit")
}

// F15: the store's own pool keeps autocommit off whatever the dsn says: MySQL's variable names ignore case, and
// go-sql-driver sends the dsn's parameters in map order, so a dsn with AUTOCOMMIT=1 beside the pool's
// autocommit=0 would leave about half the connections with autocommit on (each of the handler's statements
// after a deadlock would then commit by itself).
func TestOwnPool_KeepsAutocommitOffWhateverTheDSNSpelling(t *testing.T) {
	db := businessDB(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	cfg.Params = map[string]string{"AUTOCOMMIT": "1"}
	store, err := dedup.NewStore(db, dedup.WithTxDSN(cfg.FormatDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	ctx := context.Background()
	readOnly := &mysql.MySQLError{Number: 1290} // RollbackAfter closes the connection: the next Begin opens a new one
	for range 64 {
		txn, err := store.Protocol().Begin(ctx)
		require.NoError(t, err)
		var on int
		err = txn.SQLTx().GetContext(ctx, &on, `SELECT @@session.autocommit`)
		_ = txn.RollbackAfter(readOnly)
		require.NoError(t, err)
		require.Zero(t, on, "a connection of the transaction pool with autocommit on")
	}
}

// Store.Close while a transaction runs on the store's own pool: Close does not wait for it (database/sql
// closes idle connections only), and the transaction still commits on the connection it holds, which is
// closed when it is released; a Begin after Close fails.
func TestStore_CloseWhileATransactionRunsLetsItCommit(t *testing.T) {
	f := newFixture(t)
	store, err := dedup.NewStore(f.db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	ctx := context.Background()
	d := testenv.NewDelivery(f.group, f.orderMsg(t, f.prefix+"-e", f.prefix+"-1"))
	d.EventID = f.prefix + "-e"
	txn, err := store.Protocol().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Protocol().Claim(ctx, txn, d))
	require.NoError(t, store.Close())
	require.NoError(t, store.Protocol().Confirm(ctx, txn, d))
	require.NoError(t, txn.Commit())
	assert.Equal(t, 1, f.dedupRows(t, d.EventID))
	assert.Zero(t, store.Protocol().(txproto.Pooled).TxStats().OpenConnections, "the released connection is closed, not pooled")
	_, err = store.Protocol().Begin(ctx)
	assert.Error(t, err)
}

// F15: a handler that runs LOCK TABLES on the store's own pool (a misuse: it commits the transaction
// implicitly) must not hand its table locks to the next message on the same connection: with the locks
// still held, every later statement on the connection on another table would fail (MySQL 1100). The pool
// keeps no ROLLBACK-proof state here: the next BEGIN releases table locks (a regression guard; it passes
// on the merged code too).
func TestOwnPool_HandlerThatLocksTablesDoesNotBreakTheNextMessage(t *testing.T) {
	f := newFixture(t)
	tbl := strings.ReplaceAll(testenv.Unique("lock_tables"), "-", "_")
	_, err := f.db.Exec("CREATE TABLE " + tbl + " (id INT PRIMARY KEY)")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = f.db.Exec("DROP TABLE " + tbl) }) // runs after the store is closed
	oneConnStore(t, f, testenv.MySQLDSN())
	ev1, ev2 := f.prefix+"-e1", f.prefix+"-e2"
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == ev1 {
			if _, err := tx.ExecContext(ctx, "LOCK TABLES "+tbl+" READ"); err != nil {
				return consumer.Outcome{}, err
			}
		}
		return consumer.Processed(), nil
	})
	_, _ = f.handle(h, f.orderMsg(t, ev1, f.prefix+"-1")) // whatever becomes of the misuse itself
	o, err := f.handle(h, f.orderMsg(t, ev2, f.prefix+"-2"))
	require.NoError(t, err, "the next message inherited the table locks")
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, 1, f.dedupRows(t, ev2))
}
