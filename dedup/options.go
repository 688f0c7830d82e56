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
	tables tableNames
	// prefixed: WithTablePrefix was given; others: the names of the other options given, in order.
	prefixed bool
	others   []string
}

// apply runs opt on c.
func (opt Option) apply(c *storeConfig) error { return opt(c) }

// WithTablePrefix prefixes the dedup schema's table names, the migrations' version table included, so that
// several dedup schemas share one database (the package doc, "Table names"). Default: no prefix. Give the
// same prefix to Migrate, NewStore, JanitorConfig and `rmqguard dedup purge`. A prefix of other than lowercase ASCII
// letters, digits and '_', longer than 39 characters or starting with a digit, or the option given twice,
// fails NewStore and Migrate with an error naming WithTablePrefix.
func WithTablePrefix(prefix string) Option {
	return func(c *storeConfig) error {
		if c.prefixed {
			return fmt.Errorf("dedup: WithTablePrefix: given twice: a store has one set of tables")
		}
		t, err := newTableNames(prefix)
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
// two scopes. One Store serves one scope. The scope must be 1 to maxGroupLength characters.
func WithScope(scope string) Option {
	return func(c *storeConfig) error {
		c.others = append(c.others, "WithScope")
		if scope == "" || utf8.RuneCountInString(scope) > maxGroupLength {
			return fmt.Errorf("dedup: WithScope: scope %q must be 1 to %d characters (the consumer_group column)", scope, maxGroupLength)
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

// WithTxDSN runs the transactions of Begin on a pool of the store's own, opened on dsn (go-sql-driver's
// format; db's server and database), with autocommit off per connection and interpolateParams on: three
// round trips fewer per message (the package doc, "The transaction's pool"). Everything else stays on db.
// The pool is bounded like db's and keeps as many idle connections (64 when db is unbounded); Close closes
// it. An empty or unparsable dsn, or the option given twice, fails here.
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
