package dedup_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// questions is the number of statements the server counted on tx's connection (Questions, this statement
// included). A SELECT: it adds no doubt to the transaction.
func questions(ctx context.Context, t testing.TB, tx *sqlx.Tx) int {
	t.Helper()
	var v string
	require.NoError(t, tx.GetContext(ctx, &v,
		`SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'QUESTIONS'`))
	n, err := strconv.Atoi(v)
	require.NoError(t, err)
	return n
}

// Statements per processed message, counted by the server on a pool of one connection, between
// one message's handler and the next's: on db's pool COMMIT, SELECT (Confirm), SET autocommit = 1,
// SET autocommit = 0, BEGIN, INSERT (Claim) and the count itself (7); on the store's own pool (WithTxDSN)
// COMMIT, BEGIN, INSERT and the count (4), what a hand-written transaction per message costs.
func TestDedup_HappyPathRoundTripsPerMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []dedup.Option
		want int
	}{
		{"shared pool", nil, 7},
		{"own pool", []dedup.Option{dedup.WithTxDSN(testenv.MySQLDSN())}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			one, err := sqlx.Open("mysql", testenv.MySQLDSN())
			require.NoError(t, err)
			t.Cleanup(func() { _ = one.Close() })
			one.SetMaxOpenConns(1)
			f.store, err = dedup.NewStore(one, c.opts...)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, f.store.Close()) })
			var counts []int
			h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				counts = append(counts, questions(ctx, t, tx))
				return consumer.Processed(), nil
			})
			for i := range 4 {
				id := f.prefix + "-" + strconv.Itoa(i)
				o, err := f.handle(h, f.orderMsg(t, id, id))
				require.NoError(t, err)
				require.Equal(t, consumer.KindProcessed, o.Kind)
				assert.Equal(t, 1, f.dedupRows(t, id))
			}
			for i := 1; i < len(counts); i++ {
				assert.Equal(t, c.want, counts[i]-counts[i-1], "statements between message %d and %d", i-1, i)
			}
		})
	}
}

// F15: a lock-wait timeout (1205) inside the handler, which the handler swallows and retries once the lock
// is free. Unless innodb_rollback_on_timeout is on, MySQL rolled back the statement only: the transaction
// still holds its dedup row and commits the event once. The failed statement makes Confirm read the row
// back on the store's own pool (WithTxDSN), and finds it. With innodb_rollback_on_timeout on, the row is
// gone and the message is retried (dedup.ErrClaimLost), as after a deadlock.
func TestF15_LockWaitTimeoutSwallowedInsideTheHandlerCommitsOnce(t *testing.T) {
	f := newFixture(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = "1"
	f.store, err = dedup.NewStore(f.db, dedup.WithTxDSN(cfg.FormatDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.store.Close()) })
	var rollbackOnTimeout bool
	require.NoError(t, f.db.Get(&rollbackOnTimeout, `SELECT @@innodb_rollback_on_timeout`))

	locked := f.prefix + "-locked"
	_, err = f.db.Exec(`INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		VALUES (?, 'sku', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, locked)
	require.NoError(t, err)
	holder, err := f.db.Beginx()
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.Exec(`UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, locked)
	require.NoError(t, err)

	timeouts := 0
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		var err error
		for range 2 { // a bounded local retry of the statement
			_, err = tx.ExecContext(ctx, `UPDATE dedup_test_order SET version = version + 1 WHERE order_no = ?`, locked)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == mysqlerr.ErLockWaitTimeout {
				timeouts++
				require.NoError(t, holder.Rollback()) // the lock is free for the retry
				continue
			}
			break
		}
		if err != nil {
			return consumer.Outcome{}, err
		}
		return handleOrderCreated(ctx, tx, d)
	})
	ev := f.prefix + "-e"
	o, err := f.handle(h, f.orderMsg(t, ev, ev))
	require.Equal(t, 1, timeouts, "the scenario produced its lock-wait timeout")
	if rollbackOnTimeout {
		require.ErrorIs(t, err, dedup.ErrClaimLost)
		assert.Equal(t, 0, f.dedupRows(t, ev))
		f.requireOnceThenDuplicate(t, h, ev, ev)
	} else {
		require.NoError(t, err)
		assert.Equal(t, consumer.KindProcessed, o.Kind)
	}
	assert.Equal(t, 1, f.dedupRows(t, ev))
	var n int
	require.NoError(t, f.db.Get(&n, `SELECT COUNT(*) FROM dedup_test_order WHERE order_no = ?`, ev))
	assert.Equal(t, 1, n, "the event took effect once")
}
