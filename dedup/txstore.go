package dedup

import (
	"context"

	"github.com/rmqguard/rmqguard/consumer"
)

// TxStore is what middleware.Dedup needs from a dedup store in transactional mode. *Store (MySQL or
// MariaDB) implements it; a fast path (a cache of "done" event IDs, such as the Redis layer of package
// dedup/redisfast) wraps a *Store and implements it too, so that it is a layer around the store, not a fork
// of the middleware. Whatever a layer adds, the database's processed_event row stays the only thing that
// decides whether an event is new: a layer may only answer "done" for an event whose row committed.
type TxStore interface {
	// Done reports, before any transaction, whether d's event is known to be processed in its scope
	// without asking the database; ok false means "not known", never "new". *Store always answers
	// ("", false) at no cost. cause is the duplicate's cause when known, "" when not (the consumer then
	// reports "unknown").
	Done(ctx context.Context, d *consumer.Delivery) (cause string, ok bool)
	// Scope returns d's dedup scope (see Store.Scope).
	Scope(d *consumer.Delivery) string
	// Begin starts the local transaction of one message (see Store.Begin).
	Begin(ctx context.Context) (*Txn, error)
	// Claim inserts d's processed_event row in txn; ErrDuplicate when the scope has it (see Store.Claim).
	Claim(ctx context.Context, txn *Txn, d *consumer.Delivery) error
	// ClaimBatch inserts the rows of a batch's members in txn in one statement; dup[i] when ds[i]'s scope
	// has its event (see Store.ClaimBatch).
	ClaimBatch(ctx context.Context, txn *Txn, ds []*consumer.Delivery) (dup []bool, err error)
	// Confirm checks that txn still holds its row, right before Commit (see Store.Confirm).
	Confirm(ctx context.Context, txn *Txn, d *consumer.Delivery) error
	// DuplicateCause reads why a duplicate came again (see Store.DuplicateCause).
	DuplicateCause(ctx context.Context, txn *Txn, d *consumer.Delivery) (string, error)
	// DuplicateCauses reads why each of a batch's duplicates came again, in one read after the batch's
	// transaction ended (see Store.DuplicateCauses).
	DuplicateCauses(ctx context.Context, ds []*consumer.Delivery) ([]string, error)
	// RecordStale records d as stale in a transaction of its own (see Store.RecordStale).
	RecordStale(ctx context.Context, d *consumer.Delivery) error
	// RecordStaleIn records d as stale inside a batch's shared transaction (see Store.RecordStaleIn).
	RecordStaleIn(ctx context.Context, txn *Txn, d *consumer.Delivery) error
	// ConfirmBatch checks that a batch's transaction still holds its kept rows, right before its Commit
	// (see Store.ConfirmBatch).
	ConfirmBatch(ctx context.Context, txn *Txn, kept []*consumer.Delivery) error
}

// Done is the TxStore fast path of the database store: the database has no answer without a round trip,
// so it always returns ("", false) and middleware.Dedup goes on to Begin and Claim.
func (s *Store) Done(context.Context, *consumer.Delivery) (string, bool) { return "", false }

var _ TxStore = (*Store)(nil)
