package dedup

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/pending"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// ErrNoTx means a transactional handler ran without the dedup middleware's transaction in its context:
// put middleware.Dedup before it in the chain.
var ErrNoTx = errors.New("dedup: no dedup transaction in context (wire middleware.Dedup before this handler)")

// TxFromContext returns the dedup transaction of the message being handled, if any. Business writes
// made through it commit or roll back together with the dedup row.
func TxFromContext(ctx context.Context) (*sqlx.Tx, bool) {
	txn, ok := txproto.TxnFrom(ctx)
	if !ok {
		return nil, false
	}
	tx := txn.SQLTx()
	return tx, tx != nil
}

// TxHandler is a business handler that writes through the dedup transaction. Return consumer.Processed()
// to commit; consumer.Stale(…) when the event is older than the state it would change (e.g. a
// TransitionStale): the transaction rolls back, so nothing the handler wrote is kept, the event is recorded
// as stale (result_status "STALE", see the package doc, "Stale events": a later delivery is a duplicate) and the
// message is acknowledged; or an error to roll back and retry (classified by the retry package).
type TxHandler func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error)

// Handle adapts a TxHandler into a consumer.Handler that takes the transaction from the context.
// Without one (no dedup middleware in the chain) it returns ErrNoTx and an unset outcome (a retry).
// Its result is recognisable by IsTxHandler, and so is every handler that is the result of a call to Handle
// (a typed adapter that returns Handle(...) is one); middleware.Chain uses that to refuse a chain without
// middleware.Dedup around it. A nil h is a wiring mistake: Handle returns a refused handler instead, so
// middleware.Chain and consumer.New fail with "dedup.Handle: the handler function is nil".
func Handle(h TxHandler) consumer.Handler {
	if h == nil {
		return pending.Refuse[consumer.Delivery](errNilTxHandler, consumer.DeadLetter)
	}
	return &txHandler{h: h}
}

// errNilTxHandler is why Handle(nil) is refused.
var errNilTxHandler = errors.New("dedup.Handle: the handler function is nil")

// txHandler is a TxHandler adapted by Handle.
type txHandler struct{ h TxHandler }

// Handle runs the TxHandler in the transaction middleware.Dedup put in ctx.
func (t *txHandler) Handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	tx, ok := TxFromContext(ctx)
	if !ok {
		return consumer.Outcome{}, ErrNoTx
	}
	return t.h(ctx, tx, d)
}

// IsTxHandler reports whether h was returned by Handle, i.e. needs the transaction of middleware.Dedup; a
// handler that wraps a Handle result in one of its own is not recognised.
func IsTxHandler(h consumer.Handler) bool {
	_, ok := h.(*txHandler)
	return ok
}
