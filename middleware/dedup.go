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
// releasing the key. An event ID the scope already processed is a consumer.Duplicate and the handler
// does not run; its Cause (redelivery, resend or replay) comes from the stored row (dedup.Store.DuplicateCause,
// one SELECT on the duplicate path only). A failed begin, claim or commit is returned as an error (a retry): a message is never
// acknowledged unless its row committed. Before committing it checks that the transaction still holds its
// row (dedup.Store.Confirm): a deadlock inside the handler rolls the whole transaction back, and a handler
// that retried its statement would otherwise commit the effect without the row. The Delivery must carry
// an EventID (put EventID before Dedup).
func Dedup(store *dedup.Store) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (o consumer.Outcome, err error) {
			if d.EventID == "" {
				return consumer.Outcome{}, retry.Permanent(fmt.Errorf("dedup: %w (put middleware.EventID before middleware.Dedup)", ErrUnidentifiable))
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
			if err != nil || (o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate) {
				return o, err
			}
			if err := store.Confirm(ctx, txn, d); err != nil {
				return consumer.Outcome{}, err
			}
			if err := txn.Commit(); err != nil {
				return consumer.Outcome{}, fmt.Errorf("dedup: commit group %s event %s: %w", d.Group, d.EventID, err)
			}
			return o, nil
		}
	}
}

// duplicate is the outcome of a duplicate d with its cause; when the stored row cannot be read the cause
// is left empty and the consumer guesses it from the message (consumer.Decision): a duplicate is a
// duplicate whatever its cause, so this never fails the message.
func duplicate(ctx context.Context, store *dedup.Store, txn *dedup.Txn, d *consumer.Delivery) consumer.Outcome {
	o := consumer.Duplicate()
	if cause, err := store.DuplicateCause(ctx, txn, d); err == nil {
		o.Cause = cause
	}
	return o
}
