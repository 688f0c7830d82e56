package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/pending"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// Dedup runs the rest of the chain in one local transaction that first inserts the message's
// processed_event row (scope and event ID), and commits it only with a processed outcome (a stale one is
// rolled back and recorded apart); a copy already committed is a duplicate, acknowledged without running
// the handler. A nil store is an error wrapping ErrNilDependency. See the package doc, "Dedup".
func Dedup(store dedup.TxStore) (Middleware, error) {
	if isNil(store) {
		return Middleware{}, fmt.Errorf("%w: middleware.Dedup: store is nil — did dedup.NewStore fail? check its error", ErrNilDependency)
	}
	return Middleware{kind: kindDedup, wrap: (&dedupMW{store: store.Protocol()}).wrap, store: store}, nil
}

// dedupMW is a Dedup middleware; Chain knows it by its Middleware's kind.
type dedupMW struct{ store txproto.Store }

func (w *dedupMW) wrap(next consumer.Handler) consumer.Handler {
	store := w.store
	if next == nil { // composed by hand around nothing
		return pending.Refuse[consumer.Delivery](errNilNext, consumer.DeadLetter)
	}
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (o consumer.Outcome, err error) {
		if d.EventID == "" {
			return consumer.Outcome{}, retry.Permanent(fmt.Errorf("dedup: %w (put middleware.EventID before middleware.Dedup)", ErrUnidentifiable))
		}
		if cause, done := store.Done(ctx, d); done {
			return committedDuplicate(ctx, cause), nil
		}
		if b := batch.FromContext[consumer.Outcome, string](ctx); b != nil {
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
		o, err = next.Handle(txproto.WithTxn(ctx, txn), d)
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
	})
}

// abandoned is the error of d's handler that returned after a Timeout around Dedup had abandoned it at
// its deadline: nothing is committed (nobody reads the error; Timeout has answered).
func abandoned(ctx context.Context, d *consumer.Delivery) error {
	return fmt.Errorf("dedup: group %s event %s: abandoned at its deadline, not committed: %w", d.Group, d.EventID, context.Cause(ctx))
}

// duplicate is the outcome of a duplicate d with its cause; when the stored row cannot be read the cause
// is left empty and the consumer reports "unknown" (consumer.Decision): a duplicate is a
// duplicate whatever its cause, so this never fails the message.
func duplicate(ctx context.Context, store txproto.Store, txn txproto.Txn, d *consumer.Delivery) consumer.Outcome {
	settle(ctx) // the claim's 1062 decided it; the cause read next only labels it
	cause, err := store.DuplicateCause(ctx, txn, d)
	if err != nil {
		cause = ""
	}
	return committedDuplicate(ctx, cause)
}

// committedDuplicate is the outcome of an event whose dedup row is committed already (or, in a batch, held
// by a kept member): a duplicate with cause (empty: the consumer reports "unknown", or a batch
// sets it when it ends), carrying Committed, so that no deadline turns the store's finding into a retry (settle: a Timeout around Dedup waits for it, unless it
// has answered already, and then nobody reads this outcome).
func committedDuplicate(ctx context.Context, cause string) consumer.Outcome {
	settle(ctx)
	o := consumer.Duplicate()
	o.Cause, o.Committed = cause, true
	return o
}

// stale rolls back txn (dropping whatever the handler wrote) and then records d as stale in a transaction
// of its own; the outcome is o, a duplicate when a concurrent delivery of the event recorded or processed it
// first (dedup.ErrDuplicate: the event counts as stale once), or the recording's error (a retry). A failed
// rollback is not an error here: the transaction is not committed whatever happens to its connection (see
// txproto.Txn.RollbackAfter).
func stale(ctx context.Context, store txproto.Store, txn txproto.Txn, d *consumer.Delivery, o consumer.Outcome) (consumer.Outcome, error) {
	_ = txn.Rollback()
	if !settle(ctx) {
		return consumer.Outcome{}, abandoned(ctx, d)
	}
	err := store.RecordStale(ctx, d)
	if errors.Is(err, dedup.ErrDuplicate) {
		var cause string // read on its own: the transaction is over
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
