package dedup

import (
	"context"

	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/consumer"
)

// RecordStaleIn records d's event as stale inside txn, a batch's shared transaction: its processed_event
// row with result_status ResultStale and txn's claim token, committed with the batch. Call it after rolling
// txn back to the member's savepoint (Txn.RollbackTo), so that nothing its handler wrote survives. It
// returns an error wrapping ErrDuplicate when the scope already has the row (the member is then a
// duplicate), or the insert's error, wrapped; an empty or too long event ID is permanent, as in Claim.
func (s *Store) RecordStaleIn(ctx context.Context, txn *Txn, d *consumer.Delivery) error {
	if err := s.insertRow(ctx, txn.Tx, d, ResultStale, txn.token); err != nil {
		return fmt.Errorf("dedup: record stale in the batch: %w", err)
	}
	txn.claims.add(s.Scope(d), d.EventID)
	return nil
}

// ConfirmBatch is Confirm for a batch's shared transaction, right before its COMMIT: kept are the members
// whose row (claimed, or recorded stale by RecordStaleIn) the transaction must still hold. On the pool of
// WithTxDSN, without a doubt since BEGIN (see Confirm), it costs nothing; otherwise one SELECT COUNT(*) of
// the kept rows carrying txn's claim token must equal len(kept), else it returns an error wrapping
// ErrClaimLost (a deadlock in any member rolled the whole transaction back): every kept member is retried.
// It returns the query's error, wrapped. An empty kept costs nothing and returns nil.
func (s *Store) ConfirmBatch(ctx context.Context, txn *Txn, kept []*consumer.Delivery) error {
	if len(kept) == 0 || (txn.tracked && !txn.doubtSinceBegin()) {
		return nil
	}
	var q strings.Builder
	q.WriteString(s.q.confirmBatchHead)
	args := make([]any, 0, 1+2*len(kept))
	args = append(args, txn.token)
	for i, d := range kept {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, s.Scope(d), d.EventID)
	}
	q.WriteString(")")
	var n int
	if err := txn.Tx.GetContext(ctx, &n, q.String(), args...); err != nil {
		return fmt.Errorf("dedup: confirm a batch of %d: %w", len(kept), err)
	}
	if n != len(kept) {
		return fmt.Errorf("batch holds %d of its %d rows: %w", n, len(kept), ErrClaimLost)
	}
	return nil
}
