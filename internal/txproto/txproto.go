// Package txproto is the transaction protocol between the dedup stores (*dedup.Store, *redisfast.Layer) and
// what drives them (middleware.Dedup and Lease, their batch paths, outbox): a store claims an event's
// processed_event row inside one message's transaction and confirms it before the commit. The rules
// (claim tokens, confirms, stale rows, leases) are dedup's, in its package doc; the public dedup.TxStore
// hands this protocol over (its Protocol method) and nothing else. Errors are the store's, wrapped: test
// them with errors.Is against dedup's sentinels (ErrDuplicate, ErrClaimLost, ErrLeaseHeld).
package txproto

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
)

// Store is what middleware.Dedup needs from a dedup store. Whatever a layer adds (a fast path), the
// database's processed_event row stays the only thing that decides whether an event is new: a layer may
// only answer Done for an event whose row committed.
type Store interface {
	// Done reports, before any transaction, whether d's event is known to be processed in its scope
	// without asking the database; ok false means "not known", never "new". cause is the duplicate's cause
	// when known, "" when not (the consumer then reports "unknown").
	Done(ctx context.Context, d *consumer.Delivery) (cause string, ok bool)
	// Scope returns d's dedup scope: the store's (dedup.WithScope), else d's consumer group.
	Scope(d *consumer.Delivery) string
	// Begin starts the local transaction of one message.
	Begin(ctx context.Context) (Txn, error)
	// Claim inserts d's processed_event row in txn; dedup.ErrDuplicate when the scope has it.
	Claim(ctx context.Context, txn Txn, d *consumer.Delivery) error
	// ClaimBatch inserts the rows of a batch's members in txn in one statement; dup[i] when ds[i]'s scope
	// has its event.
	ClaimBatch(ctx context.Context, txn Txn, ds []*consumer.Delivery) (dup []bool, err error)
	// Confirm checks that txn still holds d's row, right before Commit (dedup.ErrClaimLost when not).
	Confirm(ctx context.Context, txn Txn, d *consumer.Delivery) error
	// DuplicateCause reads why a duplicate (Claim returned dedup.ErrDuplicate) came again.
	DuplicateCause(ctx context.Context, txn Txn, d *consumer.Delivery) (string, error)
	// DuplicateCauses reads why each of a batch's duplicates came again, in one read after the batch's
	// transaction ended.
	DuplicateCauses(ctx context.Context, ds []*consumer.Delivery) ([]string, error)
	// RecordStale records d as stale in a transaction of its own.
	RecordStale(ctx context.Context, d *consumer.Delivery) error
	// RecordStaleIn records d as stale inside a batch's shared transaction.
	RecordStaleIn(ctx context.Context, txn Txn, d *consumer.Delivery) error
	// ConfirmBatch checks that a batch's transaction still holds its kept rows, right before its Commit.
	ConfirmBatch(ctx context.Context, txn Txn, kept []*consumer.Delivery) error
	// CheckConcurrency returns an error, naming the fix, when handlers transactions at once would exhaust
	// the pool the store's transactions share with the handlers; nil when they cannot.
	CheckConcurrency(handlers int) error
}

// Txn is one message's (or one batch's) local transaction, begun by Store.Begin. Finish it with Commit,
// Rollback or RollbackAfter; later calls return sql.ErrTxDone.
type Txn interface {
	// SQLTx returns the transaction the handler writes through (dedup.TxFromContext).
	SQLTx() *sqlx.Tx
	// Commit commits, then runs the after-commit hooks.
	Commit() error
	// Rollback rolls back; sql.ErrTxDone when already finished.
	Rollback() error
	// RollbackAfter is Rollback for a transaction that failed with cause (nil if none).
	RollbackAfter(cause error) error
	// Savepoint sets a savepoint, with ctx as the statement's context.
	Savepoint(ctx context.Context) (Savepoint, error)
	// RollbackTo undoes everything done since sp, its claims and hooks included; the transaction stays open.
	RollbackTo(ctx context.Context, sp Savepoint) error
	// StatementContext makes ctx the context of statements run without one, until restore.
	StatementContext(ctx context.Context) (restore func())
	// Attribute makes the after-commit hooks registered next d's.
	Attribute(d *consumer.Delivery)
	// AfterCommit registers fn to run after a successful Commit; its error is counted and logged.
	AfterCommit(fn func(context.Context) error) error
	// Claimed reports whether the transaction itself inserted scope's row for eventID.
	Claimed(scope, eventID string) bool
}

// Savepoint is a point inside a Txn that it can be rolled back to (Txn.RollbackTo): the SQL name of its
// SAVEPOINT and the numbers of after-commit hooks and claims registered before it.
type Savepoint struct {
	Name          string
	Hooks, Claims int
}

// Leaser is the store of lease mode (middleware.Lease): *dedup.Store's protocol.
type Leaser interface {
	// ClaimLease commits, in a transaction of its own, a lease of duration dur on d's event;
	// dedup.ErrLeaseHeld (wrapped) while another delivery holds a live one.
	ClaimLease(ctx context.Context, d *consumer.Delivery, dur time.Duration) (Lease, error)
}

// Versioned is a store's protocol that keeps aggregate versions (*dedup.Store's): middleware.Version checks
// its table at construction.
type Versioned interface {
	// CheckAggregateSchema verifies the aggregate-version table: dedup.ErrSchema (wrapped) naming the fix.
	CheckAggregateSchema(ctx context.Context) error
}

// Pooled is a store's protocol that reports the pool its transactions take their connections from: the
// store's own (dedup.WithTxDSN), else db's. For tests: *dedup.Store's protocol is one.
type Pooled interface {
	TxStats() sql.DBStats
}

// Keyed is a fast path's protocol that names the cache key of an event (redisfast's "done" key), for the
// tools and tests that write or read such keys themselves.
type Keyed interface {
	Key(d *consumer.Delivery) string
}

// Lease is a delivery's committed claim on its event in lease mode (dedup's package doc, "Leases").
type Lease interface {
	// Hold deletes the lease row inside txn, right before its commit; dedup.ErrClaimLost when taken over.
	Hold(ctx context.Context, txn Txn) error
	// Release deletes the lease row after the event's transaction rolled back.
	Release(ctx context.Context) error
	// Expire ends the lease now but keeps its row: the next delivery takes it over.
	Expire(ctx context.Context) error
	// Takeover reports whether the lease was taken over from an earlier delivery that never finished.
	Takeover() bool
}

type txnKey struct{}

// WithTxn returns ctx carrying txn, the transaction of the message being handled (TxnFrom).
func WithTxn(ctx context.Context, txn Txn) context.Context {
	return context.WithValue(ctx, txnKey{}, txn)
}

// TxnFrom returns the transaction WithTxn put in ctx, if any.
func TxnFrom(ctx context.Context) (Txn, bool) {
	txn, ok := ctx.Value(txnKey{}).(Txn)
	return txn, ok && txn != nil
}

type leaseKey struct{}

// WithLease returns ctx carrying l, the lease of the message being handled (LeaseFrom).
func WithLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseFrom returns the lease WithLease put in ctx, if any.
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok && l != nil
}
