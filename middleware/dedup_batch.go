package middleware

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

// Batch mode of Dedup (consumer.Config.BatchSize > 1): the members of one client callback share one dedup
// transaction, begun on the first member that reaches Dedup with the batch's own context
// (consumer.Batch.Context: the consumer's run context, deadline HandlerTimeout × members) and committed
// once by the consumer after the last member (consumer.BatchResource). Each member runs between a
// SAVEPOINT and, unless it is kept, a ROLLBACK TO SAVEPOINT, with its own context for its statements:
//
//   - processed (or the handler's own duplicate): kept; its row and writes commit with the batch, and its
//     after-commit hooks run after that COMMIT;
//   - a duplicate claim (1062): the statement alone rolled back, so no ROLLBACK TO SAVEPOINT; Cause left
//     empty (the consumer guesses it);
//   - error, retry, dead letter: rolled back to its savepoint, its hooks dropped;
//   - stale: rolled back to its savepoint, then its STALE row inserted in the batch transaction (kept).
//
// When the transaction is lost (ROLLBACK TO SAVEPOINT fails, e.g. 1305 after a deadlock rolled the whole
// transaction back) the members after it are not handled (the error, a retry) and Finish returns the error:
// every kept member becomes a retry. Before COMMIT, dedup.TxStore.ConfirmBatch reads the kept rows back when
// the connection had a doubt. A member whose context ends mid-statement breaks the connection: the batch
// is retried, its committed members coming back as duplicates.

// batchTxn is a batch's shared dedup transaction, attached to the consumer.Batch under the store.
type batchTxn struct {
	store dedup.TxStore
	txn   *dedup.Txn
	mu    sync.Mutex
	kept  []*consumer.Delivery
	keys  map[string]bool // scope and event ID of the kept members
	lost  error
}

// ErrBatchLost means a batch's shared dedup transaction was lost (a deadlock or a broken connection rolled
// it back, or a savepoint statement failed): the members after it are not handled and every kept member is
// retried. It classifies as transient and does not wrap the cause, which the member that met it reports:
// its neighbours are not an outage of the store (the consumer's store gate is not tripped again by each).
var ErrBatchLost = retry.Transient(errors.New("dedup: the batch transaction is lost"))

// batchKey is the consumer.Batch key of a store's shared transaction.
type batchKey struct{ store dedup.TxStore }

// batchTxnOf returns the batch's shared transaction of store, beginning it with the batch's context.
func batchTxnOf(b *consumer.Batch, store dedup.TxStore) (*batchTxn, error) {
	key := batchKey{store}
	if r, ok := b.Resource(key).(*batchTxn); ok {
		return r, nil
	}
	txn, err := store.Begin(b.Context())
	if err != nil {
		return nil, err
	}
	bt := &batchTxn{store: store, txn: txn, keys: map[string]bool{}}
	if err := b.Attach(key, bt); err != nil {
		_ = txn.Rollback()
		return nil, err
	}
	return bt, nil
}

// dedupInBatch is Dedup for a member of batch b after Done: savepoint, claim, handler, and keeping or
// rolling back the member (see the comment above).
func dedupInBatch(ctx context.Context, store dedup.TxStore, b *consumer.Batch, d *consumer.Delivery, next consumer.Handler) (consumer.Outcome, error) {
	bt, err := batchTxnOf(b, store)
	if err != nil {
		return consumer.Outcome{}, err
	}
	if err := bt.lostErr(); err != nil {
		return consumer.Outcome{}, err
	}
	if bt.holds(d) {
		b.Depend(batchKey{store}) // a member kept earlier in this batch has its row: it stands or falls with it
		return consumer.Duplicate(), nil
	}
	sp, err := bt.txn.Savepoint(ctx)
	if err != nil {
		_ = bt.lose(err)
		return consumer.Outcome{}, err // the member that met the failure reports its cause
	}
	if err := store.Claim(ctx, bt.txn, d); err != nil {
		if errors.Is(err, dedup.ErrDuplicate) {
			return consumer.Duplicate(), nil // a committed row (statement-level rollback): nothing to undo
		}
		bt.rollbackTo(ctx, sp)
		return consumer.Outcome{}, err
	}
	o, err := next(dedup.WithTxn(ctx, bt.txn), d)
	switch {
	case err == nil && o.Kind == consumer.KindStale:
		return bt.stale(ctx, b, sp, d, o)
	case err != nil || (o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate):
		bt.rollbackTo(ctx, sp)
		return o, err
	}
	bt.keep(b, d)
	return o, nil
}

// stale rolls the member back to sp and records it stale inside the batch transaction (kept); a 1062 makes
// it a duplicate, another failure an error (the member is rolled back to sp again).
func (bt *batchTxn) stale(ctx context.Context, b *consumer.Batch, sp dedup.Savepoint, d *consumer.Delivery, o consumer.Outcome) (consumer.Outcome, error) {
	if err := bt.rollbackTo(ctx, sp); err != nil {
		return consumer.Outcome{}, err
	}
	err := bt.store.RecordStaleIn(ctx, bt.txn, d)
	if errors.Is(err, dedup.ErrDuplicate) {
		return consumer.Duplicate(), nil
	}
	if err != nil {
		bt.rollbackTo(ctx, sp)
		return consumer.Outcome{}, fmt.Errorf("dedup: group %s event %s decided stale (%s): %w", d.Group, d.EventID, o.Reason, err)
	}
	bt.keep(b, d)
	return o, nil
}

// holds reports whether a member kept earlier in the batch has d's event: d is then a duplicate without a
// claim, whose 1062 would come from the batch's own uncommitted row (a layer such as redisfast must only
// ever see a 1062 of a committed row).
func (bt *batchTxn) holds(d *consumer.Delivery) bool {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.keys[bt.store.Scope(d)+"\x00"+d.EventID]
}

// keep records d as a kept member, which depends on the batch's COMMIT.
func (bt *batchTxn) keep(b *consumer.Batch, d *consumer.Delivery) {
	bt.mu.Lock()
	bt.kept = append(bt.kept, d)
	bt.keys[bt.store.Scope(d)+"\x00"+d.EventID] = true
	bt.mu.Unlock()
	b.Depend(batchKey{bt.store})
}

// rollbackTo rolls the member back to sp; a failure loses the transaction (returned wrapped).
func (bt *batchTxn) rollbackTo(ctx context.Context, sp dedup.Savepoint) error {
	if err := bt.txn.RollbackTo(ctx, sp); err != nil {
		return bt.lose(err)
	}
	return nil
}

// lose records that the batch transaction is lost because of err (the first cause is kept, as text) and
// returns the error every later member and Finish report (ErrBatchLost).
func (bt *batchTxn) lose(err error) error {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.lost == nil {
		bt.lost = fmt.Errorf("%w: %v", ErrBatchLost, err)
	}
	return bt.lost
}

// lostErr returns why the transaction is lost, or nil.
func (bt *batchTxn) lostErr() error {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.lost
}

// Finish implements consumer.BatchResource: it rolls the transaction back when it was lost (returning why)
// or kept no member, else confirms the kept rows (dedup.TxStore.ConfirmBatch) and commits once; the kept
// members' after-commit hooks run after that COMMIT.
func (bt *batchTxn) Finish(ctx context.Context) error {
	bt.mu.Lock()
	kept, lost := bt.kept, bt.lost
	bt.mu.Unlock()
	if lost != nil || len(kept) == 0 {
		_ = bt.txn.RollbackAfter(lost)
		return lost
	}
	if err := bt.store.ConfirmBatch(ctx, bt.txn, kept); err != nil {
		_ = bt.txn.Rollback()
		return err
	}
	if err := bt.txn.Commit(); err != nil {
		return fmt.Errorf("dedup: commit a batch of %d: %w", len(kept), err)
	}
	return nil
}
