package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// The careful pass of Dedup's batch mode (consumer.Config.BatchSize > 1, batch.Batch.Careful: after a
// first pass, dedup_deferred.go, that did not keep every member): the members of one client callback share
// one dedup transaction, begun on the first member that reaches Dedup with the batch's own context
// (batch.Batch.Context: the consumer's run context, deadline HandlerTimeout × members) and committed
// once by the consumer after the last member (batch.Resource). Each member runs between a
// SAVEPOINT and, unless it is kept, a ROLLBACK TO SAVEPOINT, with its own context for its statements:
//
//   - processed (or the handler's own duplicate): kept; its row and writes commit with the batch, and its
//     after-commit hooks run after that COMMIT; its outcome carries consumer.Outcome.Committed, so that no
//     deadline overrules it (the batch's COMMIT does: a failed one makes it a retry);
//   - a duplicate claim (1062): the statement alone rolled back, so no ROLLBACK TO SAVEPOINT; its Cause is
//     read after the transaction ended, with the batch's other duplicates in one SELECT
//     (txproto.Store.DuplicateCauses), and set on the batch (batch.Batch.SetDuplicateCause); if that
//     read fails the consumer reports it as "unknown";
//   - error, retry, dead letter, a panic, or a handler that returned after the member's deadline: rolled
//     back to its savepoint, its hooks dropped;
//   - stale: rolled back to its savepoint, then its STALE row inserted in the batch transaction (kept).
//
// When the transaction is lost (ROLLBACK TO SAVEPOINT fails, e.g. 1305 after a deadlock rolled the whole
// transaction back) the members after it are not handled (the error, a retry) and Finish returns the error:
// every kept member becomes a retry; when the store lost it (a broken connection or a failed COMMIT while
// the member's context was alive, or the batch's deadline passed while it waited at the store gate),
// Finish's error wraps batch.ErrStoreUnavailable and the consumer handles the callback again instead. Before COMMIT, txproto.Store.ConfirmBatch reads the kept rows back when
// the connection had a doubt. A member whose context ends mid-statement breaks the connection: the batch
// is retried, its committed members coming back as duplicates. A member abandoned at its deadline while its
// handler still runs (middleware.Timeout outside Dedup) loses the transaction, since its late writes would
// fall into the next member's savepoint: the next member to reach Dedup, or Finish, finds it still active.
// The store's own statements that undo a member (ROLLBACK TO SAVEPOINT) use the batch's context, so that a
// member past its deadline is still rolled back.

// member is one member's pass through the batch transaction.
type member struct {
	bt  *batchTxn
	b   *batch.Batch[consumer.Outcome, string]
	idx int // the member's index in the callback (batch.Batch.Member)
	d   *consumer.Delivery
	sp  txproto.Savepoint
	ctx context.Context // the member's own: when it ended, a broken connection is the member's doing
}

// dedupInBatch is Dedup for a member of batch b after Done: savepoint, claim, handler, and keeping or
// rolling back the member (see the comment above).
func dedupInBatch(ctx context.Context, store txproto.Store, b *batch.Batch[consumer.Outcome, string], d *consumer.Delivery, next consumer.Handler) (consumer.Outcome, error) {
	bt, err := batchTxnOf(b, store)
	if err != nil {
		return consumer.Outcome{}, err
	}
	m := &member{bt: bt, b: b, idx: b.Member(), d: d, ctx: ctx}
	dup, err := bt.enter(m)
	if err != nil {
		return consumer.Outcome{}, err
	}
	if dup {
		return committedDuplicate(ctx, ""), nil // its cause is read with the batch's others when it ends
	}
	defer bt.leave()
	if m.sp, err = bt.txn.Savepoint(ctx); err != nil {
		_ = bt.lose(err, storesFault(ctx, b, nil, err))
		return consumer.Outcome{}, err // the member that met the failure reports its cause
	}
	defer bt.txn.StatementContext(ctx)() // a handler's tx.Exec ends at the member's deadline too (F7)
	// A panic below (Recover is outside Dedup) undoes the member as a failure does; the panic goes on.
	panicking := true
	defer func() {
		if panicking {
			_ = m.rollback(ErrPanic)
		}
	}()
	o, err := m.run(ctx, store, next)
	panicking = false
	return o, err
}

// run claims m's event and runs next for it inside its savepoint, then keeps or rolls back the member.
func (m *member) run(ctx context.Context, store txproto.Store, next consumer.Handler) (consumer.Outcome, error) {
	d := m.d
	if err := store.Claim(ctx, m.bt.txn, d); err != nil {
		if errors.Is(err, dedup.ErrDuplicate) {
			m.bt.duplicate(m)
			return committedDuplicate(ctx, ""), nil // a committed row (statement-level rollback): nothing to undo
		}
		m.rollback(err)
		return consumer.Outcome{}, err
	}
	o, err := next.Handle(txproto.WithTxn(ctx, m.bt.txn), d)
	if err == nil && ctx.Err() != nil {
		// The member's deadline passed while its handler ran (a handler that ignores its context, under
		// Deadline): not kept, as a message alone would not commit after its deadline.
		m.rollback(ctx.Err())
		return consumer.Outcome{}, fmt.Errorf("dedup: batch member (event %s) returned after its deadline: %w", d.EventID, context.Cause(ctx))
	}
	switch {
	case err == nil && o.Kind == consumer.KindStale:
		return m.stale(ctx, o)
	case err != nil || (o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate):
		m.rollback(err)
		return o, err
	}
	if err := m.keep(); err != nil {
		return consumer.Outcome{}, err
	}
	o.Committed = true // the consumer's COMMIT after the last member decides it now, not a deadline
	return o, nil
}

// stale rolls m back to its savepoint and records it stale inside the batch transaction (kept); a 1062
// makes it a duplicate, another failure an error (m is rolled back to its savepoint again).
func (m *member) stale(ctx context.Context, o consumer.Outcome) (consumer.Outcome, error) {
	if err := m.rollback(nil); err != nil {
		return consumer.Outcome{}, err
	}
	err := m.bt.store.RecordStaleIn(ctx, m.bt.txn, m.d)
	if errors.Is(err, dedup.ErrDuplicate) {
		m.bt.duplicate(m)
		return committedDuplicate(ctx, ""), nil
	}
	if err != nil {
		m.rollback(err)
		return consumer.Outcome{}, fmt.Errorf("dedup: group %s event %s decided stale (%s): %w", m.d.Group, m.d.EventID, o.Reason, err)
	}
	if err := m.keep(); err != nil {
		return consumer.Outcome{}, err
	}
	o.Committed = true // the consumer's COMMIT after the last member decides it now, not a deadline
	return o, nil
}

// keep records m as kept, depending on the batch's COMMIT; ErrBatchLost when the transaction was lost
// meanwhile, or an error when a Timeout around Dedup abandoned m at its deadline (m is then not kept, and is
// rolled back to its savepoint).
func (m *member) keep() error {
	if !settle(m.ctx) {
		err := abandoned(m.ctx, m.d)
		m.rollback(err)
		return err
	}
	bt := m.bt
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.lost != nil {
		return bt.lost
	}
	bt.kept = append(bt.kept, m.d)
	bt.keys[eventKey(bt.store, m.d)] = true
	m.b.Depend(batchKey{bt.store}, m.idx)
	return nil
}
