package dedup

import (
	"context"
	"fmt"
	"strconv"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Savepoint sets a new savepoint in the transaction (SAVEPOINT rmqguard_sp_<R>_N, R 16 hex digits of the
// transaction's random claim token, N counting from 1 per transaction: a handler's own SAVEPOINT cannot
// take the name, which would move the member's savepoint past its claim so that rolling the member back
// kept its claim)
// with ctx, the statement's context (a batch member's own). It returns the statement's error, wrapped.
// The careful pass of batch mode (middleware.Dedup in a consumer batch) sets one before each member's claim.
func (t *localTx) Savepoint(ctx context.Context) (txproto.Savepoint, error) {
	t.savepoints++
	sp := txproto.Savepoint{Name: "rmqguard_sp_" + t.token[:16] + "_" + strconv.Itoa(t.savepoints), Hooks: t.hooks.mark(), Claims: t.claims.mark()}
	if _, err := t.Tx.ExecContext(ctx, "SAVEPOINT "+sp.Name); err != nil {
		return txproto.Savepoint{}, fmt.Errorf("dedup: savepoint %s: %w", sp.Name, err)
	}
	return sp, nil
}

// RollbackTo undoes everything the transaction did since sp (ROLLBACK TO SAVEPOINT), its claim included,
// and drops the after-commit hooks and claims registered since; the transaction stays open. It returns the
// statement's error, wrapped: MySQL 1305 (no such savepoint) means the server already rolled the whole
// transaction back (a deadlock, 1213), so nothing done before sp will commit either.
func (t *localTx) RollbackTo(ctx context.Context, sp txproto.Savepoint) error {
	doubt := !t.tracked || t.doubtSinceBegin()
	if _, err := t.Tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+sp.Name); err != nil {
		return fmt.Errorf("dedup: rollback to savepoint %s: %w", sp.Name, err)
	}
	t.hooks.truncate(sp.Hooks)
	t.claims.truncate(sp.Claims)
	if !doubt {
		_ = t.conn.Raw(func(dc any) error {
			if c, ok := dc.(*trackedConn); ok {
				c.clearDoubt()
			}
			return nil
		})
	}
	return nil
}

// StatementContext makes ctx (a batch member's own) the context of the transaction's statements run
// without one (a handler's tx.Exec, whose context.Background can never end) until restore is called, so
// that such a statement is cancelled at the member's deadline, as a message's alone is, not at the end of
// the batch's context given to Begin. Cancelling a statement closes the connection: the batch is lost. On
// db's pool (no WithTxDSN) such statements have no fallback context and it does nothing. restore puts the
// transaction's context back, unless the connection has moved on (the transaction ended).
func (t *localTx) StatementContext(ctx context.Context) (restore func()) {
	var prev context.Context
	_ = t.conn.Raw(func(dc any) error {
		if c, ok := dc.(*trackedConn); ok && c.txCtx != nil {
			prev, c.txCtx = c.txCtx, ctx
		}
		return nil
	})
	if prev == nil {
		return func() {}
	}
	return func() {
		_ = t.conn.Raw(func(dc any) error {
			if c, ok := dc.(*trackedConn); ok && c.txCtx == ctx {
				c.txCtx = prev
			}
			return nil
		})
	}
}
