package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

type txnKey struct{}

// WithTxn returns ctx carrying txn: its Tx for TxFromContext and its after-commit hooks for AfterCommit.
// middleware.Dedup calls it for the rest of the chain.
func WithTxn(ctx context.Context, txn *Txn) context.Context {
	return context.WithValue(WithTx(ctx, txn.Tx), txnKey{}, txn)
}

// AfterCommit registers fn to run once the message's dedup transaction (the Txn in ctx, see WithTxn) has
// committed: for effects that must not happen unless the business writes did, such as publishing an event
// or invalidating a cache. fn never runs when the transaction rolls back (an error, a retry, a stale
// event, a lost claim, a failed or abandoned commit), nor for a duplicate (the handler does not run). It
// runs at most once per commit, in the consumer's goroutine before the message is acknowledged, with the
// handler's context; it is not exactly-once: a crash between COMMIT and fn loses it, and the redelivery
// is then a duplicate that does not run it again. A panic in fn is recovered and logged; the message stays
// committed. It returns ErrNoTx when ctx carries no dedup transaction, and an error wrapping sql.ErrTxDone
// when the transaction is already finished (a handler abandoned at its deadline).
func AfterCommit(ctx context.Context, fn func(context.Context)) error {
	txn, ok := ctx.Value(txnKey{}).(*Txn)
	if !ok || txn == nil {
		return ErrNoTx
	}
	return txn.AfterCommit(fn)
}

// AfterCommit registers fn to run after the transaction commits (see the package function AfterCommit).
// It returns an error for a nil fn, or one wrapping sql.ErrTxDone when the transaction is finished.
func (t *Txn) AfterCommit(fn func(context.Context)) error {
	if fn == nil {
		return errors.New("dedup: AfterCommit: fn is nil")
	}
	return t.hooks.add(fn)
}

// afterCommit is a transaction's list of after-commit hooks; closed when the transaction finishes.
type afterCommit struct {
	mu     sync.Mutex
	fns    []func(context.Context)
	closed bool
}

func (a *afterCommit) add(fn func(context.Context)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("dedup: AfterCommit: %w", sql.ErrTxDone)
	}
	a.fns = append(a.fns, fn)
	return nil
}

// mark returns the number of hooks registered so far (a Savepoint's mark).
func (a *afterCommit) mark() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.fns)
}

// truncate drops the hooks registered after mark n (a rollback to a savepoint).
func (a *afterCommit) truncate(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n < len(a.fns) {
		clear(a.fns[n:])
		a.fns = a.fns[:n]
	}
}

// close refuses further hooks and returns those registered.
func (a *afterCommit) close() []func(context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	fns := a.fns
	a.fns = nil
	return fns
}

// run calls each hook in order; a panic is logged with its stack and does not stop the others.
func (a *afterCommit) run(ctx context.Context, log *zap.Logger, fns []func(context.Context)) {
	for i, fn := range fns {
		func() {
			defer func() {
				if r := recover(); r != nil {
					log.Error("after-commit hook panicked; the transaction stays committed",
						zap.Int("hook", i), zap.Any("panic", r), zap.Stack("stack"))
				}
			}()
			fn(ctx)
		}()
	}
}
