package dedup

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// DoubtSinceBegin exposes whether txn's tracked connection has a doubt (see trackedConn) to the tests.
func DoubtSinceBegin(txn txproto.Txn) bool { return txn.(*localTx).doubtSinceBegin() }

// Names the package keeps to itself, for its external tests.
var (
	ErrVersionMoved = errVersionMoved
	Migrations      = migrations
	MigrationsFor   = migrationsFor
)

const (
	MaxGroupLength         = maxGroupLength
	MaxEventTypeLength     = maxEventTypeLength
	MaxAggregateIDLength   = maxAggregateIDLength
	MaxAggregateTypeLength = maxAggregateTypeLength
	DefaultJanitorInterval = defaultJanitorInterval
)

// LockName returns the MySQL named lock of j's scope: "rmqguard-dedup-janitor:" and 32 hex digits.
func (j *Janitor) LockName() string { return j.lock }

// Leading reports whether j holds its scope's lock.
func (j *Janitor) Leading() bool { return j.leading.Load() }

// Aggregate exposes aggregateKey to the tests.
type Aggregate = aggregateKey

// AggregateVersionOf exposes aggregateVersion to the tests.
func (s *Store) AggregateVersionOf(ctx context.Context, tx *sqlx.Tx, a Aggregate) (int64, error) {
	return s.aggregateVersion(ctx, tx, a)
}

// AdvanceAggregateOf exposes advanceAggregate to the tests.
func (s *Store) AdvanceAggregateOf(ctx context.Context, tx *sqlx.Tx, a Aggregate, from, to int64, eventID string) error {
	return s.advanceAggregate(ctx, tx, a, from, to, eventID)
}

// NewTableNames exposes newTableNames to the tests.
var NewTableNames = newTableNames

// TableNames exposes t's table names (processed, aggregate, lease, version) to the tests.
func TableNames(t tableNames) []string {
	return []string{t.processed(), t.aggregate(), t.lease(), t.version()}
}

// StoreTableNames exposes the table names of s to the tests.
func StoreTableNames(s *Store) []string { return TableNames(s.tables) }

// ZeroTableNames exposes the table names of the zero tableNames to the tests.
func ZeroTableNames() []string { return TableNames(tableNames{}) }

// TxConnInterruptible reports whether a connection of s's own transaction pool (WithTxDSN) was dialled by the
// pool, so that its statements are interrupted by the connection rather than watched by the driver.
func TxConnInterruptible(ctx context.Context, s *Store) (bool, error) {
	conn, err := s.txdb.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var ok bool
	err = conn.Raw(func(dc any) error {
		tc, _ := dc.(*trackedConn)
		ok = tc != nil && tc.net != nil
		return nil
	})
	return ok, err
}
