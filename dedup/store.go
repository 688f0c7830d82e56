package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/retry"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Column sizes of processed_event; longer values cannot be stored, so the EventID middleware rejects them.
const (
	// maxEventIDLength is the longest event ID the store holds, in characters.
	maxEventIDLength = dedupsql.MaxEventIDLength
	// maxGroupLength is the longest consumer group name the store holds, in characters: RocketMQ's own
	// limit on group names.
	maxGroupLength = dedupsql.MaxScopeLength
	// maxEventTypeLength is the size of the event_type column; longer types are stored cut to it.
	maxEventTypeLength = 64
	// maxAggregateIDLength is the size of the aggregate_id column; longer IDs are stored cut to it.
	maxAggregateIDLength = 128
)

// dedupKey is the name MySQL and MariaDB give processed_event's primary key (consumer_group, event_id).
const dedupKey = "PRIMARY"

// ErrDuplicate means the event ID was already processed in the dedup scope: the insert of its
// processed_event row hit the primary key (MySQL 1062 on the dedup table, told apart from a 1062 on a
// business table because it comes from the dedup insert itself).
var ErrDuplicate = errors.New("dedup: event already processed by this consumer group")

// Store is the MySQL (or MariaDB) dedup store in transactional mode. It is safe for concurrent use.
type Store struct {
	db    *sqlx.DB
	txdb  *sqlx.DB // the pool of WithTxDSN (autocommit off, tracked connections); nil: Begin uses db
	owned *sqlx.DB // db when Open opened it: Close closes it too; nil: db is the caller's
	scope string   // "" = the delivery's consumer group
	log   *zap.Logger
	obs   Observer // after-commit hook failures (WithObserver)
	// tables are the schema's table names (WithTablePrefix); q the statements naming them, built once.
	tables tableNames
	q      queries
}

// NewStore returns a Store on db, which must hold the dedup schema (Migrate, with the same WithTablePrefix),
// configured by opts (WithScope, WithLogger, WithObserver, WithTxDSN, WithTablePrefix).
// Errors: ErrSchema (wrapped, with the ALTER TABLE that fixes it) from CheckSchema, bounded by 5 s; a nil
// db; an invalid option (named, with why); the check's queries; a WithTxDSN pool that cannot connect or
// reaches another host, port or database than db. On failure it closes the pool of WithTxDSN.
func NewStore(db *sqlx.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("dedup: NewStore: db is nil")
	}
	var c storeConfig
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("dedup: NewStore: an option is nil")
		}
		if err := opt.apply(&c); err != nil {
			return nil, err
		}
	}
	s := &Store{db: db, log: zap.NewNop(), obs: nopObserver{}, scope: c.scope, tables: c.tables, q: newQueries(c.tables)}
	if c.log != nil {
		s.log = c.log
	}
	if c.obs != nil {
		s.obs = c.obs
	}
	if c.txDSN != "" {
		pool, err := openTxPool(db, c.txDSN)
		if err != nil {
			return nil, err
		}
		s.txdb = pool
	}
	ctx, cancel := context.WithTimeout(context.Background(), schemaCheckTimeout)
	defer cancel()
	if err := checkSchema(ctx, db, s.tables); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("dedup: NewStore: %w", err)
	}
	if err := s.checkSameDatabase(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("dedup: NewStore: %w", err)
	}
	return s, nil
}

// whereQuery names the server and database a connection is on.
const whereQuery = `SELECT CONCAT(@@hostname, ':', @@port, '/', COALESCE(DATABASE(), ''))`

// checkSameDatabase checks that the pool of WithTxDSN, if any, reaches the server and database of db (the
// same host name, port and current database): claims written in one database while RecordStale, Purge and
// DuplicateCause use another would split the dedup record in two. It reads from a transaction it rolls back
// (the pool's connections have autocommit off).
func (s *Store) checkSameDatabase(ctx context.Context) error {
	if s.txdb == nil {
		return nil
	}
	var want, got string
	if err := s.db.GetContext(ctx, &want, whereQuery); err != nil {
		return fmt.Errorf("check the database of db: %w", err)
	}
	tx, err := s.txdb.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("WithTxDSN: connect: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.GetContext(ctx, &got, whereQuery); err != nil {
		return fmt.Errorf("WithTxDSN: check its database: %w", err)
	}
	if got != want {
		return fmt.Errorf("WithTxDSN: dsn reaches %s but db is on %s: both must be the same database", got, want)
	}
	return nil
}

// Close closes the store's own transaction pool (WithTxDSN), if any: its idle connections at once, each
// connection in use when its transaction finishes (Close does not wait; a transaction that runs still
// commits or rolls back), and a later Begin fails. db is the caller's and stays open, unless Open opened
// it: then it is closed too. It returns the pools' Close errors, joined.
func (s *Store) Close() error {
	var errs []error
	if s.txdb != nil {
		if err := s.txdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("dedup: close the transaction pool: %w", err))
		}
	}
	if s.owned != nil {
		if err := s.owned.Close(); err != nil {
			errs = append(errs, fmt.Errorf("dedup: close the pool Open opened: %w", err))
		}
	}
	return errors.Join(errs...)
}

// scopeOf returns the dedup scope of d: the store's scope (WithScope), or else d's consumer group.
func (s *Store) scopeOf(d *consumer.Delivery) string {
	if s.scope != "" {
		return s.scope
	}
	return d.Group
}

// TxStats returns the statistics of the pool Begin takes its connections from: the store's own (WithTxDSN),
// else db's (for the tests, through Protocol).
func (s storeProtocol) TxStats() sql.DBStats {
	if s.txdb != nil {
		return s.txdb.Stats()
	}
	return s.db.Stats()
}

// TablePrefix returns the prefix of the store's table names (WithTablePrefix; "" for the default names).
func (s *Store) TablePrefix() string { return s.tables.prefix }

// DB returns the database the store writes to.
func (s *Store) DB() *sqlx.DB { return s.db }

// Claim inserts d's processed_event row (its scope, see Scope, and d.EventID) with txn's claim token, in txn;
// consumed_at is the database's UTC clock. It returns ErrDuplicate on MySQL 1062 on the row's primary key:
// the scope already processed the event (or a transaction holding the key committed while Claim waited).
// MySQL 1205/1213 from that wait come back wrapped (transient); an empty event ID, or one longer than
// 128 characters, is permanent.
func (s storeProtocol) Claim(ctx context.Context, pt txproto.Txn, d *consumer.Delivery) error {
	txn, err := local(pt)
	if err != nil {
		return err
	}
	if err := s.insertRow(ctx, txn.Tx, d, dedupsql.ResultSuccess, txn.token); err != nil {
		return err
	}
	txn.claims.add(s.scopeOf(d), d.EventID)
	txn.hooks.claimed(d.Group, d.EventID)
	return nil
}

// insertRow inserts d's processed_event row with result_status status and claim token through ex (a
// transaction, or the pool for a statement of its own); see Claim for what it checks and returns.
func (s *Store) insertRow(ctx context.Context, ex sqlx.ExecerContext, d *consumer.Delivery, status, token string) error {
	scope := s.scopeOf(d)
	if err := checkKey(scope, d.EventID); err != nil {
		return err
	}
	_, err := ex.ExecContext(ctx, s.q.claim,
		scope, d.EventID, cut(d.EventType, maxEventTypeLength), cut(d.AggregateID, maxAggregateIDLength),
		d.Topic, d.Msg.MsgId, status, token)
	if key, dup := mysqlerr.DuplicateKey(err); dup {
		// The insert touches processed_event only, whose one unique key is its primary key; a 1062 naming
		// another key means the table is not the schema this store expects.
		if key != dedupKey && key != "" {
			return fmt.Errorf("dedup: claim scope %s event %s: duplicate on unexpected key %q of %s: %w",
				scope, d.EventID, key, s.tables.processed(), err)
		}
		return fmt.Errorf("%w: scope %s event %s", ErrDuplicate, scope, d.EventID)
	}
	if err != nil {
		return fmt.Errorf("dedup: claim scope %s event %s: %w", scope, d.EventID, err)
	}
	return nil
}

// checkKey refuses, as permanent, an empty event ID or one longer than maxEventIDLength, and a scope
// longer than maxGroupLength: the key columns cannot hold them.
func checkKey(scope, eventID string) error {
	if eventID == "" || utf8.RuneCountInString(eventID) > maxEventIDLength {
		return retry.Permanentf("dedup: event ID %q is empty or longer than %d characters", eventID, maxEventIDLength)
	}
	if utf8.RuneCountInString(scope) > maxGroupLength {
		return retry.Permanentf("dedup: consumer group %q is longer than %d characters", scope, maxGroupLength)
	}
	return nil
}

// ErrClaimLost means the transaction no longer holds its processed_event row when it is about to commit:
// MySQL rolled the transaction back underneath the handler (a deadlock, 1213, rolls back the whole
// transaction, and statements after it run in a new one). Committing would apply the effect without its
// dedup row; the message is retried instead. It classifies as transient. In lease mode, the lease's Hold returns
// it too when the lease was taken over by another delivery after it expired.
var ErrClaimLost = retry.Transient(errors.New("dedup: the transaction lost its processed_event row (rolled back under the handler, e.g. by a deadlock)"))

// Confirm checks, inside txn, that txn still holds the processed_event row its Claim wrote: the row must be
// there with txn's claim token (a row a concurrent duplicate committed after this transaction was rolled
// back carries another token). Call it right before Commit. It returns an error wrapping ErrClaimLost when
// the row is gone or not this transaction's, or the query's error. On the pool of WithTxDSN it reads the
// row back only when, since BEGIN, a statement of txn failed or one that is not plain DML ran (nothing else
// ends a transaction underneath the handler), so the happy path costs no round trip.
func (s storeProtocol) Confirm(ctx context.Context, pt txproto.Txn, d *consumer.Delivery) error {
	txn, err := local(pt)
	if err != nil {
		return err
	}
	if txn.tracked && !txn.doubtSinceBegin() {
		return nil
	}
	var n int
	scope := s.scopeOf(d)
	err = txn.Tx.GetContext(ctx, &n, s.q.confirm, scope, d.EventID, txn.token)
	if err != nil {
		return fmt.Errorf("dedup: confirm scope %s event %s: %w", scope, d.EventID, err)
	}
	if n != 1 {
		return fmt.Errorf("scope %s event %s: %w", scope, d.EventID, ErrClaimLost)
	}
	return nil
}

// cut returns s as valid UTF-8 (invalid bytes replaced by U+FFFD) cut to at most n characters: the
// informational columns must never reject a message whose event ID is fine.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Processed reports whether the dedup scope (a consumer group unless WithScope named another) has a
// committed processed_event row for eventID.
func (s *Store) Processed(ctx context.Context, scope, eventID string) (bool, error) {
	var n int
	err := s.db.GetContext(ctx, &n, s.q.processed, scope, eventID)
	if err != nil {
		return false, fmt.Errorf("dedup: lookup scope %s event %s: %w", scope, eventID, err)
	}
	return n > 0, nil
}
