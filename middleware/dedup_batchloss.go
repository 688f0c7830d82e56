package middleware

import (
	"context"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/retry"
)

// How a batch's shared transaction (dedup_batch.go) is undone for one member, and whose fault its loss is:
// a member's (the batch is retried, spending attempts) or the store's (the consumer waits at the store gate
// and handles the callback again, spending none).

// rollback rolls m back to its savepoint with the batch's context; a failure loses the transaction (the
// error returned is ErrBatchLost). cause is why m is not kept (nil: its outcome, not an error). Nothing is
// rolled back once the transaction is lost.
func (m *member) rollback(cause error) error {
	if err := m.bt.lostErr(); err != nil {
		return err
	}
	if err := m.bt.txn.RollbackTo(m.b.Context(), m.sp); err != nil {
		lost := err
		if cause != nil { // name what lost it (a 1213 in this member), not only the 1305 that followed
			lost = fmt.Errorf("member %d (event %s) failed: %v; then %w", m.idx+1, m.d.EventID, cause, err)
		}
		return m.bt.lose(lost, storesFault(m.ctx, m.b, cause, err))
	}
	return nil
}

// storesFault reports whether err, which lost the batch transaction of the member with context ctx and
// failure cause (nil: none), is the store's doing rather than the member's: the member's context had not
// ended, its own failure (if any) is an infrastructure one, and err is an infrastructure failure (a broken
// connection) or the batch's own deadline ended the transaction (it outlasted that deadline only by
// waiting at the store gate). A member whose own statement broke its connection (a packet the server
// refuses) is the member's fault: its batch is retried, not handled again in a loop.
func storesFault(ctx context.Context, b *batch.Batch[consumer.Outcome, string], cause, err error) bool {
	if ctx.Err() != nil || (cause != nil && retry.Classify(cause) != retry.ClassInfrastructure) {
		return false
	}
	return retry.Classify(err) == retry.ClassInfrastructure || b.Context().Err() != nil
}

// storeFailure returns err wrapping batch.ErrStoreUnavailable when outage (or, with outage false, when
// err itself is an infrastructure failure: a failed read-back or COMMIT), so that the consumer waits for
// the store and handles the callback again instead of spending every member's attempt.
func storeFailure(err error, outage bool) error {
	if err != nil && (outage || retry.Classify(err) == retry.ClassInfrastructure) {
		return fmt.Errorf("%w (%w)", err, batch.ErrStoreUnavailable)
	}
	return err
}
