package dedup

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dedupsql"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Column sizes of processed_event's topic and msg_id, which ClaimBatch checks (Claim leaves it to the
// server's strict mode).
const (
	maxTopicLength = 255
	maxMsgIDLength = 64
)

// ClaimBatch claims ds's events in txn with one multi-row INSERT IGNORE, in the order of ds (sort it by scope
// and event ID); dup[i] reports that ds[i] is a duplicate, not claimed (the package doc, "Batches"). An
// empty ds costs nothing. Errors: before any statement, a member it cannot claim this way (Claim decides it
// alone: what Claim refuses, or a field not valid UTF-8 or too long for its column); the statement's
// error, wrapped (roll txn back then).
func (s storeProtocol) ClaimBatch(ctx context.Context, pt txproto.Txn, ds []*consumer.Delivery) (dup []bool, err error) {
	txn, err := local(pt)
	if err != nil {
		return nil, err
	}
	dup = make([]bool, len(ds))
	if len(ds) == 0 {
		return dup, nil
	}
	var q strings.Builder
	q.WriteString(s.q.claimBatchHead)
	args := make([]any, 0, 8*len(ds))
	first := make(map[[2]string]int, len(ds)) // scope and event ID → index of its row in ds
	for i, d := range ds {
		scope := s.scopeOf(d)
		if err := checkBatchRow(scope, d); err != nil {
			return nil, fmt.Errorf("dedup: claim a batch of %d: %w", len(ds), err)
		}
		k := [2]string{scope, d.EventID}
		if _, ok := first[k]; ok {
			dup[i] = true
			continue
		}
		if len(first) > 0 {
			q.WriteString(", ")
		}
		first[k] = i
		q.WriteString(s.q.claimBatchRow)
		args = append(args, scope, d.EventID, cut(d.EventType, maxEventTypeLength), cut(d.AggregateID, maxAggregateIDLength),
			d.Topic, d.Msg.MsgId, dedupsql.ResultSuccess, txn.token)
	}
	res, err := txn.Tx.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("dedup: claim a batch of %d: %w", len(first), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("dedup: claim a batch of %d: rows affected: %w", len(first), err)
	}
	switch {
	case n == 0: // every event was there: no read needed
		for _, i := range first {
			dup[i] = true
		}
	case int(n) < len(first):
		owned, err := s.ownRows(ctx, txn, first)
		if err != nil {
			return nil, err
		}
		for k, i := range first {
			dup[i] = !owned[k]
		}
	}
	for k, i := range first {
		if !dup[i] {
			txn.claims.add(k[0], k[1])
		}
	}
	return dup, nil
}

// ownRows returns which of keys (scope and event ID) have a row carrying txn's claim token: one SELECT by
// primary key.
func (s *Store) ownRows(ctx context.Context, txn *localTx, keys map[[2]string]int) (map[[2]string]bool, error) {
	var q strings.Builder
	q.WriteString(s.q.ownedHead)
	args := make([]any, 0, 1+2*len(keys))
	args = append(args, txn.token)
	for k := range keys {
		if len(args) > 1 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, k[0], k[1])
	}
	q.WriteString(")")
	var rows []struct {
		Scope   string `db:"consumer_group"`
		EventID string `db:"event_id"`
	}
	if err := txn.Tx.SelectContext(ctx, &rows, q.String(), args...); err != nil {
		return nil, fmt.Errorf("dedup: read back the claims of a batch of %d: %w", len(keys), err)
	}
	owned := make(map[[2]string]bool, len(rows))
	for _, r := range rows {
		owned[[2]string{r.Scope, r.EventID}] = true
	}
	return owned, nil
}

// checkBatchRow refuses what Claim refuses (checkKey) and what INSERT IGNORE would store altered instead of
// failing: text that is not valid UTF-8, a topic or message ID longer than its column.
func checkBatchRow(scope string, d *consumer.Delivery) error {
	if err := checkKey(scope, d.EventID); err != nil {
		return err
	}
	for _, c := range []struct {
		name, v string
		max     int
	}{{"event ID", d.EventID, maxEventIDLength}, {"scope", scope, maxGroupLength}, {"topic", d.Topic, maxTopicLength}, {"message ID", d.Msg.MsgId, maxMsgIDLength}} {
		if !utf8.ValidString(c.v) || utf8.RuneCountInString(c.v) > c.max {
			return fmt.Errorf("%s %q is not valid UTF-8 or longer than %d characters", c.name, c.v, c.max)
		}
	}
	return nil
}

// Attribute makes the after-commit hooks registered next d's: a failed one is counted and logged under
// d's group and event ID. Claim does it; a batch whose members were claimed together (ClaimBatch) calls it
// before each member's handler.
func (t *localTx) Attribute(d *consumer.Delivery) { t.hooks.claimed(d.Group, d.EventID) }

// RecordStaleIn records d's event as stale inside txn, a batch's shared transaction: its processed_event
// row with result_status "STALE" and txn's claim token, committed with the batch. Call it after rolling
// txn back to the member's savepoint (localTx.RollbackTo), so that nothing its handler wrote survives. It
// returns an error wrapping ErrDuplicate when the scope already has the row (the member is then a
// duplicate), or the insert's error, wrapped; an empty or too long event ID is permanent, as in Claim.
func (s storeProtocol) RecordStaleIn(ctx context.Context, pt txproto.Txn, d *consumer.Delivery) error {
	txn, err := local(pt)
	if err != nil {
		return err
	}
	if err := s.insertRow(ctx, txn.Tx, d, dedupsql.ResultStale, txn.token); err != nil {
		return fmt.Errorf("dedup: record stale in the batch: %w", err)
	}
	txn.claims.add(s.scopeOf(d), d.EventID)
	return nil
}

// ConfirmBatch is Confirm for a batch's shared transaction, right before its COMMIT: kept are the members
// whose row (claimed, or recorded stale by RecordStaleIn) the transaction must still hold. On the pool of
// WithTxDSN, without a doubt since BEGIN (see Confirm), it costs nothing; otherwise one SELECT COUNT(*) of
// the kept rows carrying txn's claim token must equal len(kept), else it returns an error wrapping
// ErrClaimLost (a deadlock in any member rolled the whole transaction back): every kept member is retried.
// It returns the query's error, wrapped. An empty kept costs nothing and returns nil.
func (s storeProtocol) ConfirmBatch(ctx context.Context, pt txproto.Txn, kept []*consumer.Delivery) error {
	txn, err := local(pt)
	if err != nil {
		return err
	}
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
		args = append(args, s.scopeOf(d), d.EventID)
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
