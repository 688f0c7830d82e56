package redisfast

import (
	"context"
	"errors"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// Scope returns d's dedup scope, from the wrapped store.
func (l *Layer) Scope(d *consumer.Delivery) string { return l.store.Scope(d) }

// Begin starts the message's transaction in the wrapped store.
func (l *Layer) Begin(ctx context.Context) (*dedup.Txn, error) { return l.store.Begin(ctx) }

// CheckConcurrency is the wrapped store's check (dedup.Store.CheckConcurrency), nil when it has none: the
// layer's Redis calls take no database connection.
func (l *Layer) CheckConcurrency(handlers int) error {
	if cc, ok := l.store.(interface{ CheckConcurrency(int) error }); ok {
		return cc.CheckConcurrency(handlers)
	}
	return nil
}

// Claim claims d's row in the wrapped store and registers, as an after-commit step of txn, the write of d's
// "done" key holding d's message ID. When the scope already has the row (dedup.ErrDuplicate) and it is not
// txn's own, it writes the key with no message ID unless one exists (SET NX; the package doc, "Keys"). Redis
// failures are counted, never returned; the store's errors are returned as they are.
func (l *Layer) Claim(ctx context.Context, txn *dedup.Txn, d *consumer.Delivery) error {
	err := l.store.Claim(ctx, txn, d)
	switch {
	case err == nil:
		key, msgID := l.Key(d), d.Msg.MsgId
		if hookErr := txn.AfterCommit(func(ctx context.Context) { l.mark(ctx, key, msgID, false) }); hookErr != nil {
			l.fallback(reasonMarkFailed) // the transaction is already over: it will not commit either
		}
	case errors.Is(err, dedup.ErrDuplicate) && !l.ownClaim(ctx, txn, d):
		l.mark(ctx, l.Key(d), "", true)
	}
	return err
}

// ClaimBatch claims a batch's rows in the wrapped store (dedup.Store.ClaimBatch) and, as Claim does for
// each, registers the write of the "done" key of every member claimed as an after-commit step of txn, and
// writes (SET NX, no message ID) the key of every duplicate whose row is not txn's own.
func (l *Layer) ClaimBatch(ctx context.Context, txn *dedup.Txn, ds []*consumer.Delivery) ([]bool, error) {
	dup, err := l.store.ClaimBatch(ctx, txn, ds)
	if err != nil {
		return dup, err
	}
	for i, d := range ds {
		switch {
		case !dup[i]:
			key, msgID := l.Key(d), d.Msg.MsgId
			if hookErr := txn.AfterCommit(func(ctx context.Context) { l.mark(ctx, key, msgID, false) }); hookErr != nil {
				l.fallback(reasonMarkFailed)
			}
		case !l.ownClaim(ctx, txn, d):
			l.mark(ctx, l.Key(d), "", true)
		}
	}
	return dup, nil
}

// ownClaim reports whether the row d's claim ran into is txn's own, not committed (dedup.Txn.Claimed, no
// round trip): a transaction that claims several deliveries (a batch) would meet its own row if two of
// them carried the same event, and that row goes away if the transaction rolls back.
func (l *Layer) ownClaim(_ context.Context, txn *dedup.Txn, d *consumer.Delivery) bool {
	return txn.Claimed(l.store.Scope(d), d.EventID)
}

// Confirm checks the claim in the wrapped store.
func (l *Layer) Confirm(ctx context.Context, txn *dedup.Txn, d *consumer.Delivery) error {
	return l.store.Confirm(ctx, txn, d)
}

// DuplicateCause reads the duplicate's cause from the wrapped store.
func (l *Layer) DuplicateCause(ctx context.Context, txn *dedup.Txn, d *consumer.Delivery) (string, error) {
	return l.store.DuplicateCause(ctx, txn, d)
}

// DuplicateCauses reads the causes of a batch's duplicates from the wrapped store.
func (l *Layer) DuplicateCauses(ctx context.Context, ds []*consumer.Delivery) ([]string, error) {
	return l.store.DuplicateCauses(ctx, ds)
}

// RecordStale records d as stale in the wrapped store and, once that row is written (it commits on its
// own), writes d's "done" key, so a later delivery is a duplicate without the database.
func (l *Layer) RecordStale(ctx context.Context, d *consumer.Delivery) error {
	if err := l.store.RecordStale(ctx, d); err != nil {
		return err
	}
	l.mark(ctx, l.Key(d), d.Msg.MsgId, false)
	return nil
}

// mark writes key = msgID with the TTL (only when absent if nx), bounded by Config.Timeout even when ctx
// has ended (a commit that happened must still be recorded); a failure is counted as reasonMarkFailed and
// starts the cool-down; during one nothing is written (reasonSkipped).
func (l *Layer) mark(ctx context.Context, key, msgID string, nx bool) {
	if l.quiet() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
	defer cancel()
	var err error
	if nx {
		err = l.rdb.SetNX(ctx, key, msgID, l.cfg.TTL).Err()
	} else {
		err = l.rdb.Set(ctx, key, msgID, l.cfg.TTL).Err()
	}
	if err != nil {
		l.coolDown()
		l.fallback(reasonMarkFailed)
	}
}

// RecordStaleIn records d as stale inside the batch transaction txn in the wrapped store and registers the
// write of d's "done" key as an after-commit step of txn: the key appears only once the batch committed.
func (l *Layer) RecordStaleIn(ctx context.Context, txn *dedup.Txn, d *consumer.Delivery) error {
	if err := l.store.RecordStaleIn(ctx, txn, d); err != nil {
		return err
	}
	key, msgID := l.Key(d), d.Msg.MsgId
	if hookErr := txn.AfterCommit(func(ctx context.Context) { l.mark(ctx, key, msgID, false) }); hookErr != nil {
		l.fallback(reasonMarkFailed)
	}
	return nil
}

// ConfirmBatch checks the batch's kept rows in the wrapped store.
func (l *Layer) ConfirmBatch(ctx context.Context, txn *dedup.Txn, kept []*consumer.Delivery) error {
	return l.store.ConfirmBatch(ctx, txn, kept)
}
