package redisfast

import (
	"context"
	"errors"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Protocol returns the layer's transaction protocol (for rmqguard's middlewares): the wrapped store's, with
// Done answered from Redis and the "done" keys written after the claims commit.
func (l *Layer) Protocol() txproto.Store { return layerProtocol{l} }

// layerProtocol is the transaction protocol of a *Layer (txproto.Store).
type layerProtocol struct{ *Layer }

var (
	_ txproto.Store = layerProtocol{}
	_ txproto.Keyed = layerProtocol{}
)

// Scope returns d's dedup scope, from the wrapped store.
func (l layerProtocol) Scope(d *consumer.Delivery) string { return l.inner.Scope(d) }

// Begin starts the message's transaction in the wrapped store.
func (l layerProtocol) Begin(ctx context.Context) (txproto.Txn, error) { return l.inner.Begin(ctx) }

// CheckConcurrency is the wrapped store's check: the layer's Redis calls take no database connection.
func (l layerProtocol) CheckConcurrency(handlers int) error {
	return l.inner.CheckConcurrency(handlers)
}

// Claim claims d's row in the wrapped store and registers, as an after-commit step of txn, the write of d's
// "done" key holding d's message ID. When the scope already has the row (dedup.ErrDuplicate) and it is not
// txn's own, it writes the key with no message ID unless one exists (SET NX; the package doc, "Keys"). Redis
// failures are counted, never returned; the store's errors are returned as they are.
func (l layerProtocol) Claim(ctx context.Context, txn txproto.Txn, d *consumer.Delivery) error {
	err := l.inner.Claim(ctx, txn, d)
	switch {
	case err == nil:
		key, msgID := l.Key(d), d.Msg.MsgId
		if hookErr := txn.AfterCommit(func(ctx context.Context) error { l.mark(ctx, key, msgID, false); return nil }); hookErr != nil {
			l.fallback(reasonMarkFailed) // the transaction is already over: it will not commit either
		}
	case errors.Is(err, dedup.ErrDuplicate) && !l.ownClaim(ctx, txn, d):
		l.mark(ctx, l.Key(d), "", true)
	}
	return err
}

// ClaimBatch claims a batch's rows in the wrapped store (the dedup store's ClaimBatch) and, as Claim does for
// each, registers the write of the "done" key of every member claimed as an after-commit step of txn, and
// writes (SET NX, no message ID) the key of every duplicate whose row is not txn's own.
func (l layerProtocol) ClaimBatch(ctx context.Context, txn txproto.Txn, ds []*consumer.Delivery) ([]bool, error) {
	dup, err := l.inner.ClaimBatch(ctx, txn, ds)
	if err != nil {
		return dup, err
	}
	for i, d := range ds {
		switch {
		case !dup[i]:
			key, msgID := l.Key(d), d.Msg.MsgId
			if hookErr := txn.AfterCommit(func(ctx context.Context) error { l.mark(ctx, key, msgID, false); return nil }); hookErr != nil {
				l.fallback(reasonMarkFailed)
			}
		case !l.ownClaim(ctx, txn, d):
			l.mark(ctx, l.Key(d), "", true)
		}
	}
	return dup, nil
}

// ownClaim reports whether the row d's claim ran into is txn's own, not committed (txproto.Txn.Claimed, no
// round trip): a transaction that claims several deliveries (a batch) would meet its own row if two of
// them carried the same event, and that row goes away if the transaction rolls back.
func (l layerProtocol) ownClaim(_ context.Context, txn txproto.Txn, d *consumer.Delivery) bool {
	return txn.Claimed(l.inner.Scope(d), d.EventID)
}

// Confirm checks the claim in the wrapped store.
func (l layerProtocol) Confirm(ctx context.Context, txn txproto.Txn, d *consumer.Delivery) error {
	return l.inner.Confirm(ctx, txn, d)
}

// DuplicateCause reads the duplicate's cause from the wrapped store.
func (l layerProtocol) DuplicateCause(ctx context.Context, txn txproto.Txn, d *consumer.Delivery) (string, error) {
	return l.inner.DuplicateCause(ctx, txn, d)
}

// DuplicateCauses reads the causes of a batch's duplicates from the wrapped store.
func (l layerProtocol) DuplicateCauses(ctx context.Context, ds []*consumer.Delivery) ([]string, error) {
	return l.inner.DuplicateCauses(ctx, ds)
}

// RecordStale records d as stale in the wrapped store and, once that row is written (it commits on its
// own), writes d's "done" key, so a later delivery is a duplicate without the database.
func (l layerProtocol) RecordStale(ctx context.Context, d *consumer.Delivery) error {
	if err := l.inner.RecordStale(ctx, d); err != nil {
		return err
	}
	l.mark(ctx, l.Key(d), d.Msg.MsgId, false)
	return nil
}

// mark writes key = msgID with the TTL (only when absent if nx), bounded by Config.Timeout even when ctx
// has ended (a commit that happened must still be recorded); a failure is counted as reasonMarkFailed and
// starts the cool-down; during one nothing is written (reasonSkipped).
func (l layerProtocol) mark(ctx context.Context, key, msgID string, nx bool) {
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
func (l layerProtocol) RecordStaleIn(ctx context.Context, txn txproto.Txn, d *consumer.Delivery) error {
	if err := l.inner.RecordStaleIn(ctx, txn, d); err != nil {
		return err
	}
	key, msgID := l.Key(d), d.Msg.MsgId
	if hookErr := txn.AfterCommit(func(ctx context.Context) error { l.mark(ctx, key, msgID, false); return nil }); hookErr != nil {
		l.fallback(reasonMarkFailed)
	}
	return nil
}

// ConfirmBatch checks the batch's kept rows in the wrapped store.
func (l layerProtocol) ConfirmBatch(ctx context.Context, txn txproto.Txn, kept []*consumer.Delivery) error {
	return l.inner.ConfirmBatch(ctx, txn, kept)
}
