package dedup

import (
	"context"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// TxStore is a dedup store in transactional mode, what middleware.Dedup takes: *Store (MySQL or MariaDB),
// or a fast path wrapping one (the Redis layer of package dedup/redisfast). It is sealed: its one method
// hands rmqguard's middlewares the store's transaction protocol, which only they call.
type TxStore interface {
	// Protocol returns the store's transaction protocol (for rmqguard's middlewares).
	Protocol() txproto.Store
}

// Protocol returns the store's transaction protocol (for rmqguard's middlewares and tests).
func (s *Store) Protocol() txproto.Store { return storeProtocol{s} }

var _ TxStore = (*Store)(nil)

// storeProtocol is the transaction protocol of a *Store (txproto.Store and txproto.Leaser): Begin, Claim,
// Confirm, … as the package doc describes them.
type storeProtocol struct{ *Store }

var (
	_ txproto.Store     = storeProtocol{}
	_ txproto.Leaser    = storeProtocol{}
	_ txproto.Pooled    = storeProtocol{}
	_ txproto.Versioned = storeProtocol{}
)

// local returns pt as a transaction of this package's stores; one of another implementation is refused.
func local(pt txproto.Txn) (*localTx, error) {
	txn, ok := pt.(*localTx)
	if !ok || txn == nil {
		return nil, fmt.Errorf("dedup: the transaction %T was not begun by a dedup store", pt)
	}
	return txn, nil
}

// Done is the fast path of the database store: the database has no answer without a round trip, so it
// always returns ("", false) and middleware.Dedup goes on to Begin and Claim.
func (s storeProtocol) Done(context.Context, *consumer.Delivery) (string, bool) { return "", false }

// Scope returns the dedup scope of d: the store's scope (WithScope), or else d's consumer group.
func (s storeProtocol) Scope(d *consumer.Delivery) string { return s.scopeOf(d) }
