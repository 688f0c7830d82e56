package dedup

import (
	"context"
	"fmt"
	"strconv"
)

// Savepoint is a point inside a Txn that the transaction can be rolled back to (RollbackTo): the
// database's SAVEPOINT, and the number of after-commit hooks registered before it.
type Savepoint struct {
	name   string // rmqguard_sp_<16 hex digits of the claim token>_1, …_2, …: never user text
	hooks  int
	claims int
}

// Savepoint sets a new savepoint in the transaction (SAVEPOINT rmqguard_sp_<R>_N, R 16 hex digits of the
// transaction's random claim token, N counting from 1 per transaction: a handler's own SAVEPOINT cannot
// take the name, which would move the member's savepoint past its claim so that rolling the member back
// kept its claim)
// with ctx, the statement's context (a batch member's own). It returns the statement's error, wrapped.
// The careful pass of batch mode (middleware.Dedup in a consumer batch) sets one before each member's claim.
func (t *Txn) Savepoint(ctx context.Context) (Savepoint, error) {
	t.savepoints++
	sp := Savepoint{name: "rmqguard_sp_" + t.token[:16] + "_" + strconv.Itoa(t.savepoints), hooks: t.hooks.mark(), claims: t.claims.mark()}
	if _, err := t.Tx.ExecContext(ctx, "SAVEPOINT "+sp.name); err != nil {
		return Savepoint{}, fmt.Errorf("dedup: savepoint %s: %w", sp.name, err)
	}
	return sp, nil
}

// RollbackTo undoes everything the transaction did since sp (ROLLBACK TO SAVEPOINT), its claim included,
// and drops the after-commit hooks and claims registered since; the transaction stays open. It returns the
// statement's error, wrapped: MySQL 1305 (no such savepoint) means the server already rolled the whole
// transaction back (a deadlock, 1213), so nothing done before sp will commit either.
func (t *Txn) RollbackTo(ctx context.Context, sp Savepoint) error {
	doubt := !t.tracked || t.doubtSinceBegin()
	if _, err := t.Tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+sp.name); err != nil {
		return fmt.Errorf("dedup: rollback to savepoint %s: %w", sp.name, err)
	}
	t.hooks.truncate(sp.hooks)
	t.claims.truncate(sp.claims)
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
func (t *Txn) StatementContext(ctx context.Context) (restore func()) {
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
