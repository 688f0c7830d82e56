package middleware

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// The shared transaction of a batch (see dedup_batch.go): its state, its members' turns and its Finish.

// batchTxn is a batch's shared dedup transaction, attached to the batch.Batch under the store.
type batchTxn struct {
	store txproto.Store
	txn   txproto.Txn
	b     *batch.Batch[consumer.Outcome, string]
	mu    sync.Mutex
	kept  []*consumer.Delivery
	keys  map[string]bool // scope and event ID of the kept members
	lost  error
	// outage: the transaction was lost to the store (storesFault), not to a member; Finish then wraps
	// batch.ErrStoreUnavailable.
	outage bool
	// active: a member is between its savepoint and its end (kept or rolled back); the next member
	// finding it still set means that member was abandoned at its deadline (middleware.Timeout) while it
	// still ran, and may still write: the transaction is lost.
	active bool
	// dups are the members found duplicates in the database or in the batch; their causes are read
	// together when the transaction has ended (setCauses).
	dups []*member
}

// ErrBatchLost means a batch's shared dedup transaction was lost (a deadlock or a broken connection rolled
// it back, or a savepoint statement failed): the members after it are not handled and every kept member is
// retried. It classifies as transient and does not wrap the cause, which the member that met it reports:
// its neighbours are not an outage of the store (the consumer's store gate is not tripped again by each).
var ErrBatchLost = retry.Transient(errors.New("dedup: the batch transaction is lost"))

// batchKey is the batch.Batch key of a store's shared transaction (a TxStore is a pointer: comparable).
type batchKey struct{ store txproto.Store }

// batchTxnOf returns the batch's shared transaction of store, beginning it with the batch's context.
func batchTxnOf(b *batch.Batch[consumer.Outcome, string], store txproto.Store) (*batchTxn, error) {
	key := batchKey{store}
	if r, ok := b.Resource(key).(*batchTxn); ok {
		return r, nil
	}
	txn, err := store.Begin(b.Context())
	if err != nil {
		return nil, err
	}
	bt := &batchTxn{store: store, txn: txn, b: b, keys: map[string]bool{}}
	if err := b.Attach(key, bt); err != nil {
		_ = txn.Rollback()
		return nil, err
	}
	return bt, nil
}

// enter starts m's turn: ErrBatchLost when the transaction is lost (or a member before m is still active:
// abandoned, see above); dup when a member kept earlier in the batch has m's event (m then depends on the
// batch: it stands or falls with that member's row, and its 1062 would come from the batch's own
// uncommitted row, which a layer such as redisfast must never see).
func (bt *batchTxn) enter(m *member) (dup bool, err error) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.active && bt.lost == nil {
		bt.lost = fmt.Errorf("%w: a member before it was abandoned at its deadline while its handler still ran", ErrBatchLost)
	}
	if bt.lost != nil {
		return false, bt.lost
	}
	if bt.keys[eventKey(bt.store, m.d)] {
		m.b.Depend(batchKey{bt.store}, m.idx)
		bt.dups = append(bt.dups, m)
		return true, nil
	}
	bt.active = true
	return false, nil
}

// duplicate records that m is a duplicate whose cause is to be read (setCauses).
func (bt *batchTxn) duplicate(m *member) {
	bt.mu.Lock()
	bt.dups = append(bt.dups, m)
	bt.mu.Unlock()
}

// leave ends a member's turn.
func (bt *batchTxn) leave() {
	bt.mu.Lock()
	bt.active = false
	bt.mu.Unlock()
}

// eventKey is d's scope and event ID.
func eventKey(store txproto.Store, d *consumer.Delivery) string {
	return store.Scope(d) + "\x00" + d.EventID
}

// lose records that the batch transaction is lost because of err (the first cause is kept, as text) and
// returns the error every later member and Finish report (ErrBatchLost); storeFault: the store lost it,
// not a member (see storesFault and outage).
func (bt *batchTxn) lose(err error, storeFault bool) error {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.lost == nil {
		bt.lost = fmt.Errorf("%w: %v", ErrBatchLost, err)
		bt.outage = storeFault
	}
	return bt.lost
}

// lostErr returns why the transaction is lost, or nil.
func (bt *batchTxn) lostErr() error {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.lost
}

// Finish implements batch.Resource: it ends the transaction (finish), then, unless the store was
// lost (the callback is handled again), reads the causes of the batch's duplicates (setCauses).
func (bt *batchTxn) Finish(ctx context.Context) error {
	err := bt.finish(ctx)
	if !errors.Is(err, batch.ErrStoreUnavailable) {
		bt.setCauses(ctx)
	}
	return err
}

// finish rolls the transaction back when it was lost (returning why), when a member is still active
// (abandoned: ErrBatchLost) or when no member was kept; else it confirms the kept rows
// (txproto.Store.ConfirmBatch) and commits once; the kept members' after-commit hooks run after that COMMIT.
func (bt *batchTxn) finish(ctx context.Context) error {
	bt.mu.Lock()
	if bt.active && bt.lost == nil {
		bt.lost = fmt.Errorf("%w: its last member was abandoned at its deadline while its handler still ran", ErrBatchLost)
	}
	kept, lost, outage := bt.kept, bt.lost, bt.outage
	bt.mu.Unlock()
	if lost != nil || len(kept) == 0 {
		_ = bt.txn.Rollback()
		if lost != nil && outage {
			return storeFailure(lost, true)
		}
		return lost
	}
	if err := bt.store.ConfirmBatch(ctx, bt.txn, kept); err != nil {
		_ = bt.txn.Rollback()
		return storeFailure(err, false)
	}
	if err := bt.txn.Commit(); err != nil {
		return storeFailure(fmt.Errorf("dedup: commit a batch of %d: %w", len(kept), err), false)
	}
	return nil
}

// setCauses reads the causes of the batch's duplicates in one read, after the transaction ended so that
// it sees every committed row, the batch's own included, and sets them on the batch (readCauses).
func (bt *batchTxn) setCauses(ctx context.Context) {
	bt.mu.Lock()
	dups := bt.dups
	bt.mu.Unlock()
	idx := make([]int, len(dups))
	ds := make([]*consumer.Delivery, len(dups))
	for i, m := range dups {
		idx[i], ds[i] = m.idx, m.d
	}
	readCauses(ctx, bt.store, bt.b, idx, ds)
}

// readCauses reads the causes of duplicates ds, the batch's members idx, in one read
// (txproto.Store.DuplicateCauses) and sets them on b (batch.Batch.SetDuplicateCause). A failed read
// leaves them unset: the consumer reports them as "unknown", never a guess. No duplicate costs
// nothing.
func readCauses(ctx context.Context, store txproto.Store, b *batch.Batch[consumer.Outcome, string], idx []int, ds []*consumer.Delivery) {
	if len(ds) == 0 {
		return
	}
	causes, err := store.DuplicateCauses(ctx, ds)
	if err != nil {
		return
	}
	for i, c := range causes {
		if c != "" {
			b.SetDuplicateCause(idx[i], c)
		}
	}
}
