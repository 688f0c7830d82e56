package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

// Dedup runs the rest of the chain inside one local transaction that first inserts the message's
// processed_event row, keyed by the store's dedup scope (the consumer group unless dedup.WithScope names
// another) and the event ID. The transaction is in the context (dedup.TxFromContext; use dedup.Handle for
// a typed handler), and so is its after-commit list (dedup.AfterCommit: run once after the commit only). It commits only when the handler returns consumer.Processed (or
// consumer.Duplicate, its own finding that the effect exists) without error; otherwise it rolls back,
// releasing the key. A consumer.Stale outcome without error (from Version, or the handler's own finding)
// rolls the transaction back too — the event writes nothing, even what the handler wrote before deciding —
// and then records the decision: a processed_event row with result_status dedup.ResultStale in a transaction
// of its own (dedup.Store.RecordStale), so that a later delivery of the event is a duplicate, not a second
// stale; if that insert fails, the error is returned (a retry, or Unavailable through Classify when the store
// failed: dedup.Store.RecordStale marks that). The processed path costs no extra
// statement. An event ID the scope already processed is a consumer.Duplicate and the handler
// does not run; its Cause (redelivery, resend or replay) comes from the stored row (dedup.Store.DuplicateCause,
// one SELECT on the duplicate path only). A failed begin, claim or commit is returned as an error (a retry): a message is never
// acknowledged unless its row committed (a COMMIT whose answer is lost is decided by reading its row back,
// dedup.Txn.Commit; an error when that read cannot tell, never a guess).
// The outcome of a committed transaction (processed, a recorded stale) and of a duplicate (its row
// committed earlier) carries consumer.Outcome.Committed, so that a deadline that passed while the store
// answered (Deadline, Timeout) keeps it instead of reporting a timeout (see commit.go). Before committing
// it checks that the transaction still holds its row (dedup.Store.Confirm): a deadlock inside the handler
// rolls the whole transaction back, and a handler that retried its statement would otherwise commit the
// effect without the row. On a store with its own
// transaction pool (dedup.WithTxDSN) that check reads the row back only when a statement of the
// transaction failed or was not plain DML, so a processed message costs BEGIN, the claim, the handler's
// writes and COMMIT. The Delivery must carry
// an EventID (put EventID before Dedup).
//
// store is any dedup.TxStore: a *dedup.Store, or a fast-path layer wrapping one. Before Begin, Dedup asks
// store.Done; an event the store knows is done is a consumer.Duplicate without a transaction (with the
// cause the store knows, or none: the consumer then reports consumer.CauseUnknown). *dedup.Store never
// knows (no round trip).
//
// In a batch (consumer.Config.BatchSize > 1, consumer.BatchFromContext) the members of one callback share
// one transaction instead, committed once after the last: the first pass claims them in one statement and
// runs their handlers after the last member, in aggregate order, without savepoints (dedup_deferred.go);
// a member not kept makes the consumer handle the batch again carefully, a SAVEPOINT per member
// (dedup_batch.go). dedup.HandleBatch handles a batch's new members in one call.
//
// A nil store (nil, or a nil *dedup.Store left by a failed dedup.NewStore) is an error wrapping
// ErrNilDependency. Dedup applied by hand to a nil handler is consumer.Refuse. A store with a concurrency check (a *dedup.Store) makes
// Chain's chain checked by consumer.New (see Chain).
func Dedup(store dedup.TxStore) (Middleware, error) {
	if isNil(store) {
		return Middleware{}, fmt.Errorf("%w: middleware.Dedup: store is nil — did dedup.NewStore fail? check its error", ErrNilDependency)
	}
	return Middleware{kind: kindDedup, wrap: (&dedupMW{store: store}).wrap, store: store}, nil
}

// dedupMW is a Dedup middleware; Chain knows it by its Middleware's kind.
type dedupMW struct{ store dedup.TxStore }

func (w *dedupMW) wrap(next consumer.Handler) consumer.Handler {
	store := w.store
	if next == nil { // composed by hand around nothing
		return consumer.Refuse(errNilNext)
	}
	return func(ctx context.Context, d *consumer.Delivery) (o consumer.Outcome, err error) {
		if d.EventID == "" {
			return consumer.Outcome{}, retry.Permanent(fmt.Errorf("dedup: %w (put middleware.EventID before middleware.Dedup)", ErrUnidentifiable))
		}
		if cause, done := store.Done(ctx, d); done {
			return committedDuplicate(ctx, cause), nil
		}
		if b := consumer.BatchFromContext(ctx); b != nil {
			if !b.Careful() {
				return deferInBatch(ctx, store, b, d, next)
			}
			return dedupInBatch(ctx, store, b, d, next)
		}
		txn, err := store.Begin(ctx)
		if err != nil {
			return consumer.Outcome{}, err
		}
		// Releases the key unless the transaction committed (after Commit, it does nothing); a connection
		// that met a read-only server (err) is closed instead of returned to the pool.
		defer func() { _ = txn.RollbackAfter(err) }()
		if err := store.Claim(ctx, txn, d); err != nil {
			if errors.Is(err, dedup.ErrDuplicate) {
				return duplicate(ctx, store, txn, d), nil
			}
			return consumer.Outcome{}, err
		}
		o, err = next(dedup.WithTxn(ctx, txn), d)
		if err == nil && o.Kind == consumer.KindStale {
			return stale(ctx, store, txn, d, o)
		}
		if err != nil || (o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate) {
			return o, err
		}
		if err := store.Confirm(ctx, txn, d); err != nil {
			return consumer.Outcome{}, err
		}
		if !settle(ctx) {
			return consumer.Outcome{}, abandoned(ctx, d)
		}
		if err := txn.Commit(); err != nil {
			return consumer.Outcome{}, fmt.Errorf("dedup: commit group %s event %s: %w", d.Group, d.EventID, err)
		}
		o.Committed = true
		return o, nil
	}
}

// abandoned is the error of d's handler that returned after a Timeout around Dedup had abandoned it at
// its deadline: nothing is committed (nobody reads the error; Timeout has answered).
func abandoned(ctx context.Context, d *consumer.Delivery) error {
	return fmt.Errorf("dedup: group %s event %s: abandoned at its deadline, not committed: %w", d.Group, d.EventID, context.Cause(ctx))
}

// duplicate is the outcome of a duplicate d with its cause; when the stored row cannot be read the cause
// is left empty and the consumer reports consumer.CauseUnknown (consumer.Decision): a duplicate is a
// duplicate whatever its cause, so this never fails the message.
func duplicate(ctx context.Context, store dedup.TxStore, txn *dedup.Txn, d *consumer.Delivery) consumer.Outcome {
	settle(ctx) // the claim's 1062 decided it; the cause read next only labels it
	cause, err := store.DuplicateCause(ctx, txn, d)
	if err != nil {
		cause = ""
	}
	return committedDuplicate(ctx, cause)
}

// committedDuplicate is the outcome of an event whose dedup row is committed already (or, in a batch, held
// by a kept member): a duplicate with cause (empty: the consumer reports consumer.CauseUnknown, or a batch
// sets it when it ends), carrying Committed, so that no deadline turns the store's finding into a retry (settle: a Timeout around Dedup waits for it, unless it
// has answered already, and then nobody reads this outcome).
func committedDuplicate(ctx context.Context, cause consumer.Cause) consumer.Outcome {
	settle(ctx)
	o := consumer.Duplicate()
	o.Cause, o.Committed = cause, true
	return o
}

// stale rolls back txn (dropping whatever the handler wrote) and then records d as stale in a transaction
// of its own; the outcome is o, a duplicate when a concurrent delivery of the event recorded or processed it
// first (dedup.ErrDuplicate: the event counts as stale once), or the recording's error (a retry). A failed
// rollback is not an error here: the transaction is not committed whatever happens to its connection (see
// dedup.Txn.RollbackAfter).
func stale(ctx context.Context, store dedup.TxStore, txn *dedup.Txn, d *consumer.Delivery, o consumer.Outcome) (consumer.Outcome, error) {
	_ = txn.Rollback()
	if !settle(ctx) {
		return consumer.Outcome{}, abandoned(ctx, d)
	}
	err := store.RecordStale(ctx, d)
	if errors.Is(err, dedup.ErrDuplicate) {
		var cause consumer.Cause // read on its own: the transaction is over
		if causes, err := store.DuplicateCauses(ctx, []*consumer.Delivery{d}); err == nil {
			cause = causes[0]
		}
		return committedDuplicate(ctx, cause), nil
	}
	if err != nil {
		return consumer.Outcome{}, fmt.Errorf("dedup: group %s event %s decided stale (%s): %w", d.Group, d.EventID, o.Reason, err)
	}
	o.Committed = true // the STALE row committed
	return o, nil
}
