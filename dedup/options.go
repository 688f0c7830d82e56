package dedup

import (
	"database/sql"
	"fmt"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"
)

// Option configures a Store (see NewStore).
type Option func(*Store) error

// WithScope names the dedup scope: the value written to processed_event.consumer_group and checked by
// Claim and Confirm, in place of the delivery's consumer group. By default (no WithScope) the scope is the
// consumer group. Give a renamed group (inventory → inventory-v2) the old group's name as its scope, so
// that re-reading a topic applies nothing twice; two groups that must each process every event once need
// two scopes. One Store serves one scope. The scope must be 1 to MaxGroupLength characters.
func WithScope(scope string) Option {
	return func(s *Store) error {
		if scope == "" || utf8.RuneCountInString(scope) > MaxGroupLength {
			return fmt.Errorf("dedup: WithScope: scope %q must be 1 to %d characters (the consumer_group column)", scope, MaxGroupLength)
		}
		s.scope = scope
		return nil
	}
}

// WithLogger sets the logger of the store's transactions, which reports after-commit hooks that panicked.
// The default logs nothing (zap.NewNop).
func WithLogger(log *zap.Logger) Option {
	return func(s *Store) error {
		if log == nil {
			return fmt.Errorf("dedup: WithLogger: logger is nil")
		}
		s.log = log
		return nil
	}
}

// defaultTxPoolIdle is the idle connections kept by the pool of WithTxDSN when db's pool is unbounded.
const defaultTxPoolIdle = 64

// WithTxDSN makes the store run the transactions of Begin on a connection pool of its own, opened on dsn
// (go-sql-driver's format; the same database as db), instead of on db's pool. Its connections start with
// autocommit off, set once per connection rather than toggled twice per message, which db's pool cannot
// allow because the application's own statements on it must commit by themselves; and each remembers
// whether, since its last BEGIN, a statement failed or one that is not plain DML ran (the only ways a
// transaction ends underneath the handler), so that Confirm reads the dedup row back only then, not on the
// happy path. Together they save three round trips per message. The pool is bounded like db's
// (db.Stats().MaxOpenConnections) and keeps as many idle connections (64 when db's pool is unbounded);
// Store.Close closes it. Everything else the store does (RecordStale, Purge, Probe, …) stays on db, which is
// why NewStore refuses a dsn that reaches another server or database than db. The dsn's autocommit
// parameter (any case) is replaced by autocommit=0 and multiStatements is turned off: a query holding
// several statements could end the transaction while looking like plain DML, so on this pool it fails
// (MySQL 1064). An empty or unparsable dsn, or WithTxDSN given twice, fails here.
func WithTxDSN(dsn string) Option {
	return func(s *Store) error {
		if dsn == "" {
			return fmt.Errorf("dedup: WithTxDSN: dsn is empty")
		}
		if s.txdb != nil {
			return fmt.Errorf("dedup: WithTxDSN: given twice: a store has one transaction pool")
		}
		c, err := newTxConnector(dsn)
		if err != nil {
			return err
		}
		pool := sql.OpenDB(c)
		n := s.db.Stats().MaxOpenConnections
		idle := n
		if n == 0 {
			idle = defaultTxPoolIdle
		}
		pool.SetMaxOpenConns(n)
		pool.SetMaxIdleConns(idle)
		s.txdb = sqlx.NewDb(pool, "mysql")
		return nil
	}
}
