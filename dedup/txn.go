package dedup

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// releaseTimeout bounds the statements that hand a Txn's connection back to the pool.
const releaseTimeout = 5 * time.Second

// readBackTimeout bounds the read-back of a transaction whose COMMIT's answer was lost (localTx.Commit).
const readBackTimeout = 5 * time.Second

// localTx is one message's local transaction (txproto.Txn), in which the dedup row and the business writes
// commit together, on a connection of its own with autocommit off (see the package doc, "The transaction").
// Finish it with Commit, Rollback or RollbackAfter; later calls return sql.ErrTxDone. Effects registered
// with AfterCommit run once, after a successful Commit only.
type localTx struct {
	// Tx is the transaction the handler writes through (SQLTx, TxFromContext).
	Tx    *sqlx.Tx
	conn  *sqlx.Conn
	token string // written by Claim, checked by Confirm
	// tracked: conn comes from the pool of WithTxDSN (autocommit off for good, failures since BEGIN
	// recorded); it goes back to that pool without SET autocommit = 1.
	tracked bool
	store   *Store // reads the transaction's row back when its COMMIT's answer is lost
	once    sync.Once
	stop    func() bool // stops the context watcher
	ctx     context.Context
	log     *zap.Logger
	obs     Observer
	hooks   afterCommit
	claims  claims // rows this transaction inserted (Claimed)
	// savepoints counts the savepoints set (Savepoint); only the goroutine handling the batch sets them.
	savepoints int
}

// SQLTx returns the transaction the handler writes through.
func (t *localTx) SQLTx() *sqlx.Tx { return t.Tx }

// Begin starts the local transaction of one message, on the pool of WithTxDSN if the store has one (BEGIN
// only), else on db's pool (SET autocommit = 0, then BEGIN). Errors (no connection, SET or BEGIN failed) are
// wrapped; unless ctx ended (then they classify as transient: the message's own deadline) they are marked
// retry.Infrastructure: the store could not start a transaction, which is not the message's failure.
func (s storeProtocol) Begin(ctx context.Context) (txproto.Txn, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("dedup: begin: claim token: %w", err)
	}
	pool, tracked := s.db, s.txdb != nil
	if tracked {
		pool = s.txdb
	}
	conn, err := pool.Connx(ctx)
	if err != nil {
		return nil, beginFailed(ctx, fmt.Errorf("dedup: begin: connection: %w", err))
	}
	if !tracked {
		if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
			_ = conn.Close()
			return nil, beginFailed(ctx, fmt.Errorf("dedup: begin: autocommit off: %w", err))
		}
	}
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		release(conn, false, tracked)
		return nil, beginFailed(ctx, fmt.Errorf("dedup: begin: %w", err))
	}
	t := &localTx{Tx: tx, conn: conn, tracked: tracked, store: s.Store, token: hex.EncodeToString(raw[:]), ctx: ctx, log: s.log, obs: s.obs}
	t.stop = context.AfterFunc(ctx, func() { _ = t.rollback(false) })
	return t, nil
}

// commitFailed marks a failed COMMIT as infrastructure unless it is the message's own failure: its context
// ended, the server refused it for this transaction (a MySQL error classified transient: deadlock, lock
// wait) or it is permanent; sql.ErrTxDone (already finished) is returned as it is. nil stays nil.
func commitFailed(ctx context.Context, err error) error {
	var me *mysql.MySQLError
	if err == nil || errors.Is(err, sql.ErrTxDone) || ctx.Err() != nil || retry.Classify(err) == retry.ClassPermanent ||
		(errors.As(err, &me) && retry.Classify(err) == retry.ClassTransient) {
		return err
	}
	return retry.Infrastructure(err)
}

// beginFailed marks err as infrastructure unless ctx ended.
func beginFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return retry.Infrastructure(err)
}

// Commit commits the transaction, returns the connection to the pool, and then runs the AfterCommit hooks
// in order; a failing hook is counted and logged, and Commit still returns nil. A failed COMMIT drops the
// hooks and is marked retry.Infrastructure, unless it is the message's own (a deadlock, the context's end:
// transient) or the transaction was finished (sql.ErrTxDone). A COMMIT whose answer was lost is decided by
// reading its row back (the package doc, "The transaction"): nil when it committed.
func (t *localTx) Commit() error {
	t.stop()
	err := sql.ErrTxDone
	var hooks []hook
	t.once.Do(func() {
		hooks = t.hooks.close()
		err = t.Tx.Commit()
		if mysqlerr.ReadOnly(err) {
			discard(t.conn)
		} else {
			release(t.conn, err == nil, t.tracked)
		}
		if answerLost(err) && t.committed() {
			err = nil
		}
		err = commitFailed(t.ctx, err)
	})
	if err == nil {
		t.hooks.run(t.ctx, t.log, t.obs, hooks)
	}
	return err
}

// answerLost reports whether err, from a COMMIT, may hide a commit: the server did not refuse it (a MySQL
// error) and it was not stopped before it was sent (the context's end, a transaction already finished).
func answerLost(err error) bool {
	var me *mysql.MySQLError
	return err != nil && !errors.Is(err, sql.ErrTxDone) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &me)
}

// committed reads back whether the transaction committed: one of its own rows (a claim, or a batch's STALE
// row) is there with its token. False when the transaction has no row or the read fails (see Commit).
func (t *localTx) committed() bool {
	key, ok := t.claims.first()
	if !ok || t.store == nil {
		return false
	}
	scope, eventID, _ := strings.Cut(key, "\x00")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), readBackTimeout)
	defer cancel()
	var n int
	err := t.store.db.GetContext(ctx, &n, t.store.q.committed, scope, eventID, t.token)
	return err == nil && n == 1
}

// Rollback rolls the transaction back (also what a transaction MySQL already ended may have started since)
// and returns the connection to the pool. sql.ErrTxDone means it was already finished.
func (t *localTx) Rollback() error {
	return t.RollbackAfter(nil)
}

// RollbackAfter is Rollback for a transaction that failed with cause (nil if none): when cause shows the
// server is read-only (mysqlerr.ReadOnly), the connection is closed instead of returned to the pool, so that
// no later transaction runs on a connection to a former primary. middleware.Dedup passes the chain's error.
func (t *localTx) RollbackAfter(cause error) error {
	t.stop()
	return t.rollback(mysqlerr.ReadOnly(cause))
}

// rollback finishes the transaction with a rollback unless it is already finished, then closes the
// connection (drop) or returns it to the pool; the context watcher calls it directly (t.stop may not be
// set yet when the context is already done in Begin).
func (t *localTx) rollback(drop bool) error {
	err := sql.ErrTxDone
	t.once.Do(func() {
		t.hooks.close() // dropped: their effects must not happen
		err = t.Tx.Rollback()
		if drop {
			discard(t.conn)
			return
		}
		release(t.conn, err == nil, t.tracked)
	})
	return err
}

// discard closes conn for good: database/sql drops a connection whose Raw function returns ErrBadConn.
func discard(conn *sqlx.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// release returns conn to its pool: on db's pool (tracked false) it turns autocommit back on first; the
// pool of WithTxDSN keeps it off, and turns it off again when a statement that is not plain DML ran since
// BEGIN (the handler's SET autocommit = 1 would otherwise stay on the pooled connection and let the next
// transaction's statements commit one by one after a deadlock). Unless the transaction was finished cleanly (its COMMIT or ROLLBACK
// succeeded), it first rolls back whatever may still be open, since turning autocommit on, or the next
// BEGIN, commits an open transaction. A connection on which that fails is discarded rather than handed to
// other users with autocommit off or a transaction open.
func release(conn *sqlx.Conn, finished, tracked bool) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	restore := tracked && sessionTouched(conn) // read before our ROLLBACK, which is not plain DML either
	var err error
	if !finished {
		_, err = conn.ExecContext(ctx, "ROLLBACK")
	}
	if err == nil && !tracked {
		_, err = conn.ExecContext(ctx, "SET autocommit = 1")
	}
	if err == nil && restore { // the handler may have turned it on (SET autocommit = 1, a procedure)
		_, err = conn.ExecContext(ctx, "SET autocommit = 0")
	}
	if err != nil {
		discard(conn)
		return
	}
	_ = conn.Close()
}

// sessionTouched reports whether a statement that is not plain DML ran on conn (a trackedConn) since its
// last BEGIN; true when conn cannot be asked.
func sessionTouched(conn *sqlx.Conn) bool {
	touched := true
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*trackedConn); ok {
			touched = c.sessionTouchedSinceBegin()
		}
		return nil
	})
	return touched
}

// doubtSinceBegin reports whether the transaction may have ended underneath the handler (see trackedConn);
// true also when the connection cannot be asked (the transaction already ended), so that Confirm then
// reads the row back.
func (t *localTx) doubtSinceBegin() bool {
	doubt := true
	_ = t.conn.Raw(func(dc any) error {
		if c, ok := dc.(*trackedConn); ok {
			doubt = c.doubtSinceBegin()
		}
		return nil
	})
	return doubt
}
