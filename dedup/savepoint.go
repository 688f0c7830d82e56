package dedup

import (
	"context"
	"fmt"
	"strconv"
)

// Savepoint is a point inside a Txn that the transaction can be rolled back to (RollbackTo): the
// database's SAVEPOINT, and the number of after-commit hooks registered before it.
type Savepoint struct {
	name  string // sp1, sp2, …: fixed identifiers, never user text
	hooks int
}

// Savepoint sets a new savepoint in the transaction (SAVEPOINT spN, N counting from 1 per transaction)
// with ctx, the statement's context (a batch member's own). It returns the statement's error, wrapped.
// Batch mode (middleware.Dedup with consumer.Batch) sets one before each member's claim.
func (t *Txn) Savepoint(ctx context.Context) (Savepoint, error) {
	t.savepoints++
	sp := Savepoint{name: "sp" + strconv.Itoa(t.savepoints), hooks: t.hooks.mark()}
	if _, err := t.Tx.ExecContext(ctx, "SAVEPOINT "+sp.name); err != nil {
		return Savepoint{}, fmt.Errorf("dedup: savepoint %s: %w", sp.name, err)
	}
	return sp, nil
}

// RollbackTo undoes everything the transaction did since sp (ROLLBACK TO SAVEPOINT), its claim included,
// and drops the after-commit hooks registered since sp: they never run. The transaction stays open. It
// returns the statement's error, wrapped: MySQL 1305 (no such savepoint) means the server already rolled
// the whole transaction back (a deadlock, 1213), so nothing done before sp will commit either.
func (t *Txn) RollbackTo(ctx context.Context, sp Savepoint) error {
	if _, err := t.Tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+sp.name); err != nil {
		return fmt.Errorf("dedup: rollback to savepoint %s: %w", sp.name, err)
	}
	t.hooks.truncate(sp.hooks)
	return nil
}
