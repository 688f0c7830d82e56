package dedup

import (
	"database/sql"
	"fmt"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"
)

// Option configures a Store (see NewStore); Migrate and CheckSchema take WithTablePrefix alone.
type Option func(*storeConfig) error

// storeConfig is what the options set; NewStore builds the Store from it.
type storeConfig struct {
	scope  string
	log    *zap.Logger
	obs    Observer
	txDSN  string
	tables Tables
	// prefixed: WithTablePrefix was given; others: the names of the other options given, in order.
	prefixed bool
	others   []string
}

// apply runs opt on c.
func (opt Option) apply(c *storeConfig) error { return opt(c) }

// WithTablePrefix names the dedup schema's tables prefix + "processed_event", prefix + "aggregate_version",
// prefix + "event_lease" (lease mode) and prefix + "rmqguard_dedup_db_version" (the migrations' version
// table) instead of the default names,
// so that several dedup schemas share one database without sharing rows: the same event ID is processed
// once in each. Give the same prefix to Migrate (which creates the tables), NewStore, and the
// TablePrefix of PurgeConfig and JanitorConfig (`rmqguard dedup purge --table-prefix`). The default is no
// prefix. The prefix may hold only lowercase ASCII letters, digits and '_', at most 39 characters, and the
// names must not start with a digit (see NewTables); otherwise NewStore and Migrate fail with an error
// naming WithTablePrefix and why. Given twice, it fails too.
func WithTablePrefix(prefix string) Option {
	return func(c *storeConfig) error {
		if c.prefixed {
			return fmt.Errorf("dedup: WithTablePrefix: given twice: a store has one set of tables")
		}
		t, err := NewTables(prefix)
		if err != nil {
			return fmt.Errorf("dedup: WithTablePrefix: %w", err)
		}
		c.tables, c.prefixed = t, true
		return nil
	}
}

// WithScope names the dedup scope: the value written to processed_event.consumer_group and checked by
// Claim and Confirm, in place of the delivery's consumer group. By default (no WithScope) the scope is the
// consumer group. Give a renamed group (inventory → inventory-v2) the old group's name as its scope, so
// that re-reading a topic applies nothing twice; two groups that must each process every event once need
// two scopes. One Store serves one scope. The scope must be 1 to MaxGroupLength characters.
func WithScope(scope string) Option {
	return func(c *storeConfig) error {
		c.others = append(c.others, "WithScope")
		if scope == "" || utf8.RuneCountInString(scope) > MaxGroupLength {
			return fmt.Errorf("dedup: WithScope: scope %q must be 1 to %d characters (the consumer_group column)", scope, MaxGroupLength)
		}
		c.scope = scope
		return nil
	}
}

// WithLogger sets the logger of the store's transactions, which reports each after-commit hook that
// failed (AfterCommit) in a line at error level: its effect is lost. These lines are never sampled away:
// one that log's core is enabled for but drops in Check (zap's sampler, which zap.NewProduction sets on
// every level) is written to the core directly. The default logs nothing (zap.NewNop).
func WithLogger(log *zap.Logger) Option {
	return func(c *storeConfig) error {
		c.others = append(c.others, "WithLogger")
		if log == nil {
			return fmt.Errorf("dedup: WithLogger: logger is nil")
		}
		c.log = log
		return nil
	}
}

// WithObserver reports each after-commit hook that failed to obs (e.g. *metrics.Metrics:
// rmqguard_after_commit_failures_total{group}). Default: none.
func WithObserver(obs Observer) Option {
	return func(c *storeConfig) error {
		c.others = append(c.others, "WithObserver")
		if obs == nil {
			return fmt.Errorf("dedup: WithObserver: observer is nil")
		}
		c.obs = obs
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
	return func(c *storeConfig) error {
		c.others = append(c.others, "WithTxDSN")
		if dsn == "" {
			return fmt.Errorf("dedup: WithTxDSN: dsn is empty")
		}
		if c.txDSN != "" {
			return fmt.Errorf("dedup: WithTxDSN: given twice: a store has one transaction pool")
		}
		if _, err := newTxConnector(dsn); err != nil { // unparsable: fail at the option, as before
			return err
		}
		c.txDSN = dsn
		return nil
	}
}

// openTxPool opens the pool of WithTxDSN on dsn, bounded like db's pool (see WithTxDSN).
func openTxPool(db *sqlx.DB, dsn string) (*sqlx.DB, error) {
	c, err := newTxConnector(dsn)
	if err != nil {
		return nil, err
	}
	pool := sql.OpenDB(c)
	n := db.Stats().MaxOpenConnections
	idle := n
	if n == 0 {
		idle = defaultTxPoolIdle
	}
	pool.SetMaxOpenConns(n)
	pool.SetMaxIdleConns(idle)
	return sqlx.NewDb(pool, "mysql"), nil
}
