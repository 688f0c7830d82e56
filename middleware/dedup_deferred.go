package middleware

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/collect"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// The first pass of a batch (batch.Batch.Careful false): Dedup defers each member's claim and handler
// to the batch's Finish and answers for now with an outcome that depends on it. Finish, with the batch's
// context:
//
//   - begins the transaction and claims every deferred member in one statement
//     (txproto.Store.ClaimBatch, rows in scope and event ID order, so that concurrent batches lock their
//     claims in one order); a duplicate is answered as such, its handler never runs, and its cause is read
//     with the batch's other duplicates once the transaction ended, as in a careful pass;
//   - runs the new members' handlers one after another, without savepoints, ordered by AggregateID
//     (stable: message order within an aggregate; members without one last), in message order when the
//     consumer is orderly (batch.Batch.Ordered): batches that update the same rows lock them in the same
//     order and wait for each other instead of deadlocking. A handler's context has its member's values
//     and the time the member had left when it reached Dedup, and ends with the batch's. A batch handler
//     (dedup.HandleBatch) the chains reach collects its members (internal/collect) and is called once
//     after the last handler, with the batch's context; its outcomes are its members';
//   - commits once (txproto.Store.ConfirmBatch first, as in a careful pass) and sets each member's outcome
//     (batch.Batch.SetOutcome): its handler's, or a duplicate.
//
// The first member that does not end kept — an error, a retry, a dead letter, stale, a panic, a handler
// that returned after its deadline — stops the pass: the transaction is rolled back and Finish returns an
// error wrapping batch.ErrHandleCarefully, so that the consumer handles the callback again carefully
// (dedup_batch.go), where that member is decided alone and the others commit once. A panic (Recover, above
// Dedup, does not see it here) is set as the member's outcome (batch.Batch.SetOutcome, Cause "panic"), so
// that the consumer logs it even when the careful pass does not meet it again. A deadlock (1213), a
// connection the member's failure broke, or kept rows missing before COMMIT lose the transaction instead
// (ErrBatchLost: the consumer handles the callback once more, carefully, and retries it if that pass is
// lost too); a loss that is the store's doing wraps batch.ErrStoreUnavailable, as in a careful pass. A
// chain with Timeout outside Dedup is always handled carefully (a handler Timeout may abandon cannot run
// after its member returned), and so is a batch whose members go to several stores (firstPassShares).

// deferredBatch is the first pass's share of a batch for one store, attached to the batch.Batch under
// the store (batchKey).
type deferredBatch struct {
	store txproto.Store
	b     *batch.Batch[consumer.Outcome, string]
	mu    sync.Mutex
	// members are the members deferred, in message order, each with an event no earlier member has.
	members []*deferredMember
	keys    map[string]bool // their scope and event ID (eventKey)
	// again are the members whose event an earlier member carries: duplicates when the batch commits.
	again []*deferredMember
	// careful says why the pass can keep nothing ("": it can).
	careful string
}

// deferredMember is one member whose claim and handler wait for Finish.
type deferredMember struct {
	idx  int // the member's index in the callback (batch.Batch.Member)
	d    *consumer.Delivery
	next consumer.Handler
	ctx  context.Context // the member's: its values (it has ended by Finish)
	// left is the time the member's deadline had left when it reached Dedup; bounded false: no deadline.
	left      time.Duration
	bounded   bool
	o         consumer.Outcome // its handler's, once kept
	collected bool             // a batch handler collected it (dedup.HandleBatch)
}

// deferInBatch is Dedup for a member of a first pass after Done: it defers the member to Finish and
// returns a processed outcome that depends on the batch (a duplicate when an earlier member has its event),
// marked Committed: the batch's Finish decides it, not a deadline.
func deferInBatch(ctx context.Context, store txproto.Store, b *batch.Batch[consumer.Outcome, string], d *consumer.Delivery, next consumer.Handler) (consumer.Outcome, error) {
	db, err := deferredOf(b, store)
	if err != nil {
		return consumer.Outcome{}, err
	}
	m := &deferredMember{idx: b.Member(), d: d, next: next, ctx: ctx}
	if end, ok := ctx.Deadline(); ok {
		m.left, m.bounded = time.Until(end), true
	}
	again := db.add(m)
	b.Depend(batchKey{store}, m.idx)
	if again {
		return committedDuplicate(ctx, ""), nil // its cause is read with the batch's others when it ends
	}
	o := consumer.Processed()
	o.Reason, o.Committed = "deferred to the batch's commit", true
	return o, nil
}

// deferredOf returns the batch's first-pass share of store, attaching it on first use.
func deferredOf(b *batch.Batch[consumer.Outcome, string], store txproto.Store) (*deferredBatch, error) {
	key := batchKey{store}
	if r, ok := b.Resource(key).(*deferredBatch); ok {
		return r, nil
	}
	db := &deferredBatch{store: store, b: b, keys: map[string]bool{}}
	shares, err := firstPassSharesOf(b)
	if err != nil {
		return nil, err
	}
	if err := b.Attach(key, db); err != nil {
		return nil, err
	}
	shares.add(db)
	return db, nil
}

// add records m; again when an earlier member has its event.
func (db *deferredBatch) add(m *deferredMember) (again bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, guarded := m.ctx.Value(guardKey{}).(*commitGuard); guarded && db.careful == "" {
		db.careful = "middleware.Timeout runs outside Dedup (a handler it may abandon is not deferred)"
	}
	k := eventKey(db.store, m.d)
	if db.keys[k] {
		db.again = append(db.again, m)
		return true
	}
	db.keys[k] = true
	db.members = append(db.members, m)
	return false
}

// Finish implements batch.Resource for the first pass (see the comment above).
func (db *deferredBatch) Finish(ctx context.Context) error {
	db.mu.Lock()
	members, again, careful := db.members, db.again, db.careful
	db.mu.Unlock()
	if careful != "" {
		return fmt.Errorf("dedup: %s: %w", careful, batch.ErrHandleCarefully)
	}
	if len(members) == 0 {
		return nil
	}
	txn, err := db.store.Begin(ctx)
	if err != nil {
		return storeFailure(err, ctx.Err() != nil) // the batch's deadline passed only by waits at the gate
	}
	kept, dups, err := db.run(ctx, txn, members)
	if err != nil {
		return err // run rolled back
	}
	if err := db.commit(ctx, txn, kept); err != nil {
		return err
	}
	for _, m := range kept {
		db.b.SetOutcome(m.idx, m.o)
	}
	dup := consumer.Duplicate()
	dup.Committed = true
	for _, m := range dups {
		db.b.SetOutcome(m.idx, dup)
	}
	setDuplicateCauses(ctx, db.store, db.b, append(dups, again...))
	return nil
}

// run claims members in txn and runs the handlers of those not duplicates, in lock order; kept are the
// members run, dups the duplicates. On an error it has rolled txn back.
func (db *deferredBatch) run(ctx context.Context, txn txproto.Txn, members []*deferredMember) (kept, dups []*deferredMember, err error) {
	byKey := slices.Clone(members)
	keys := make(map[*deferredMember]string, len(members))
	for _, m := range members {
		keys[m] = eventKey(db.store, m.d)
	}
	slices.SortFunc(byKey, func(a, b *deferredMember) int { return strings.Compare(keys[a], keys[b]) })
	ds := make([]*consumer.Delivery, len(byKey))
	for i, m := range byKey {
		ds[i] = m.d
	}
	dup, err := db.store.ClaimBatch(ctx, txn, ds)
	if err != nil {
		return nil, nil, db.failClaim(ctx, txn, err)
	}
	isDup := make(map[*deferredMember]bool, len(byKey))
	for i, m := range byKey {
		if dup[i] {
			isDup[m] = true
			dups = append(dups, m)
		}
	}
	kept = make([]*deferredMember, 0, len(members)-len(dups))
	for _, m := range members {
		if !isDup[m] {
			kept = append(kept, m)
		}
	}
	if !db.b.Ordered() {
		slices.SortStableFunc(kept, byAggregate)
	}
	var coll collect.Collector
	for _, m := range kept {
		if ended, failure, err := m.run(ctx, txn, &coll); err != nil {
			if errors.Is(failure, ErrPanic) {
				db.b.SetOutcome(m.idx, panicRetry()) // not applied (Finish fails): the consumer logs the panic
			}
			return nil, nil, db.fail(txn, ended, failure, err)
		}
	}
	if coll.Len() > 0 {
		if err := db.flush(ctx, txn, &coll, kept); err != nil {
			return nil, nil, err
		}
	}
	return kept, dups, nil
}

// flush calls the batch handlers (dedup.HandleBatch) that collected members of kept once each, in txn with
// the batch's context, and keeps their outcomes; as run, the first member not kept stops the pass (fail).
func (db *deferredBatch) flush(ctx context.Context, txn txproto.Txn, coll *collect.Collector, kept []*deferredMember) (err error) {
	type result struct {
		o   consumer.Outcome
		err error
	}
	results := map[*consumer.Delivery]result{}
	fctx := txproto.WithTxn(ctx, txn)
	defer txn.StatementContext(fctx)()
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("dedup: a coll handler panicked (%w): %w", newPanicError(p), batch.ErrHandleCarefully)
			}
		}()
		coll.Flush(fctx, func(d *consumer.Delivery, o consumer.Outcome, err error) { results[d] = result{o, err} })
	}()
	if err != nil {
		for _, m := range kept {
			if m.collected {
				db.b.SetOutcome(m.idx, panicRetry()) // as in run: the consumer logs the panic
			}
		}
		return db.fail(txn, ctx.Err() != nil, err, err)
	}
	for _, m := range kept {
		r, ok := results[m.d]
		if !ok {
			continue // not collected: its own handler decided
		}
		if err := m.keep(r.o, r.err, ctx.Err() != nil); err != nil {
			return db.fail(txn, ctx.Err() != nil, r.err, err)
		}
	}
	return nil
}

// byAggregate orders members by AggregateID, those without one last.
func byAggregate(a, b *deferredMember) int {
	x, y := a.d.AggregateID, b.d.AggregateID
	switch {
	case x == y:
		return 0
	case x == "":
		return 1
	case y == "":
		return -1
	}
	return strings.Compare(x, y)
}

// run runs m's handler in txn (a batch handler adds m to batch instead) and keeps its outcome. When m does
// not end kept it returns whether its handler's context had ended, its failure (nil for an outcome that
// is not kept) and the error Finish reports (keep).
func (m *deferredMember) run(ctx context.Context, txn txproto.Txn, coll *collect.Collector) (ended bool, failure, err error) {
	base := context.WithoutCancel(m.ctx)
	var mctx context.Context
	var cancel context.CancelFunc
	if m.bounded {
		mctx, cancel = context.WithTimeout(base, m.left)
	} else {
		mctx, cancel = context.WithCancel(base)
	}
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	txn.Attribute(m.d)
	defer txn.StatementContext(mctx)() // a handler's tx.Exec ends at the member's deadline too (F7)
	before := coll.Len()
	o, err := m.call(collect.With(txproto.WithTxn(mctx, txn), coll))
	m.collected = coll.Len() > before
	ended = mctx.Err() != nil
	return ended, err, m.keep(o, err, ended)
}

// keep keeps o, m's outcome, unless m does not end kept: an error (err, or ended: its handler returned
// after its deadline) or an outcome other than processed or duplicate. Its error then wraps
// batch.ErrHandleCarefully, or ErrBatchLost for a deadlock.
func (m *deferredMember) keep(o consumer.Outcome, err error, ended bool) error {
	switch {
	case err != nil && deadlocked(err):
		return fmt.Errorf("%w: member %d (event %s) failed: %v", ErrBatchLost, m.idx+1, m.d.EventID, err)
	case err != nil:
		return m.notKept(err.Error())
	case ended:
		return m.notKept("returned after its deadline")
	case o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate:
		return m.notKept("outcome " + o.Kind.String())
	}
	o.Committed = true // the batch's COMMIT decides it now, not a deadline
	m.o = o
	return nil
}

// call runs m's handler; a panic is recovered as an error (the careful pass meets it again, under Recover).
func (m *deferredMember) call(ctx context.Context) (o consumer.Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, err = panicRetry(), newPanicError(p)
		}
	}()
	return m.next.Handle(ctx, m.d)
}

// notKept is the error of m not kept, asking for a careful pass.
func (m *deferredMember) notKept(why string) error {
	return fmt.Errorf("dedup: batch member %d (event %s) not kept (%s): %w", m.idx+1, m.d.EventID, why, batch.ErrHandleCarefully)
}

// deadlocked reports whether err is MySQL's 1213: the server rolled the whole transaction back.
func deadlocked(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock
}

// fail rolls txn back after a member was not kept (ended: its handler's context had ended; failure: its
// error, nil for an outcome) and returns err, what Finish reports; unless the ROLLBACK fails (the
// connection is broken): then the transaction is lost (ErrBatchLost), and the store's doing
// (ErrStoreUnavailable) unless the member's own failure or deadline broke it (see storesFault).
func (db *deferredBatch) fail(txn txproto.Txn, ended bool, failure, err error) error {
	if rbErr := txn.RollbackAfter(failure); rbErr != nil {
		lost := fmt.Errorf("%w: %v; then %v", ErrBatchLost, err, rbErr)
		own := ended || (failure != nil && retry.Classify(failure) != retry.ClassInfrastructure)
		return storeFailure(lost, !own)
	}
	return err
}

// failClaim rolls txn back after its claim failed with err and returns what Finish reports: a loss
// (ErrBatchLost) for a deadlock; the store's doing (ErrStoreUnavailable) for an infrastructure failure or
// a broken connection; else a careful pass, where each member's claim decides it alone. A claim that ran
// into the batch's deadline (ctx ended) waited for a row another transaction holds (a concurrent delivery
// of one of its events), or Shutdown cancelled it: the store answered BEGIN, so that is no outage (and the
// broken connection follows from the cancellation); in the careful pass a member that waits again ends at
// its own deadline, as a message alone does. (The deadline passed before Finish, by waits at the store
// gate, fails Begin.)
func (db *deferredBatch) failClaim(ctx context.Context, txn txproto.Txn, err error) error {
	rbErr := txn.RollbackAfter(err)
	switch {
	case deadlocked(err):
		return fmt.Errorf("%w: %v", ErrBatchLost, err)
	case ctx.Err() == nil && (retry.Classify(err) == retry.ClassInfrastructure || rbErr != nil):
		return storeFailure(err, true)
	}
	return fmt.Errorf("%w (%w)", err, batch.ErrHandleCarefully)
}

// commit confirms the kept members' rows and commits txn (rolls it back when none was kept).
func (db *deferredBatch) commit(ctx context.Context, txn txproto.Txn, kept []*deferredMember) error {
	if len(kept) == 0 {
		_ = txn.Rollback()
		return nil
	}
	ds := make([]*consumer.Delivery, len(kept))
	for i, m := range kept {
		ds[i] = m.d
	}
	if err := db.store.ConfirmBatch(ctx, txn, ds); err != nil {
		_ = txn.Rollback()
		return storeFailure(err, false)
	}
	if err := txn.Commit(); err != nil {
		return storeFailure(fmt.Errorf("dedup: commit a batch of %d: %w", len(kept), err), false)
	}
	return nil
}

// setDuplicateCauses reads the causes of a batch's duplicates ms in one read (txproto.Store.DuplicateCauses)
// and sets them on b; see batchTxn.setCauses.
func setDuplicateCauses(ctx context.Context, store txproto.Store, b *batch.Batch[consumer.Outcome, string], ms []*deferredMember) {
	if len(ms) == 0 {
		return
	}
	idx := make([]int, len(ms))
	ds := make([]*consumer.Delivery, len(ms))
	for i, m := range ms {
		idx[i], ds[i] = m.idx, m.d
	}
	readCauses(ctx, store, b, idx, ds)
}
