// Package dedup keeps the idempotency record of chapter 13.3: one processed_event row per consumer group
// and business event ID, inserted in the same local transaction as the handler's business writes. The
// database's unique key, not an assumption that retries never overlap, settles concurrent deliveries
// (chapter 13.7).
package dedup

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// Column sizes of processed_event; longer values cannot be stored, so the EventID middleware rejects them.
const (
	// MaxEventIDLength is the longest event ID the store holds, in characters.
	MaxEventIDLength = 128
	// MaxGroupLength is the longest consumer group name the store holds, in characters: RocketMQ's own
	// limit on group names.
	MaxGroupLength = 255
	// MaxEventTypeLength is the size of the event_type column; longer types are stored cut to it.
	MaxEventTypeLength = 64
	// MaxAggregateIDLength is the size of the aggregate_id column; longer IDs are stored cut to it.
	MaxAggregateIDLength = 128
)

// dedupKey is the name MySQL and MariaDB give processed_event's primary key (consumer_group, event_id).
const dedupKey = "PRIMARY"

// ResultSuccess is the result_status of a processed event.
const ResultSuccess = "SUCCESS"

// ErrDuplicate means the event ID was already processed by the consumer group: the insert of its
// processed_event row hit the primary key (MySQL 1062 on the dedup table, told apart from a 1062 on a
// business table because it comes from the dedup insert itself).
var ErrDuplicate = errors.New("dedup: event already processed by this consumer group")

// Store is the MySQL (or MariaDB) dedup store in transactional mode. It is safe for concurrent use.
type Store struct {
	db  *sqlx.DB
	now func() time.Time
}

// NewStore returns a Store on db, which must hold the dedup schema (see Migrate). It returns an error
// when db is nil.
func NewStore(db *sqlx.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("dedup: NewStore: db is nil")
	}
	return &Store{db: db, now: time.Now}, nil
}

// DB returns the database the store writes to.
func (s *Store) DB() *sqlx.DB { return s.db }

// Txn is one message's local transaction, in which the dedup row and the business writes commit together.
// It runs on a connection of its own with autocommit off: when MySQL rolls the transaction back underneath
// the handler (a deadlock, 1213), statements the handler runs after that open a new transaction instead of
// committing one by one, so nothing is durable unless Commit succeeds. Finish it with exactly one of Commit
// or Rollback.
type Txn struct {
	// Tx is the transaction the handler writes through (dedup.TxFromContext).
	Tx   *sqlx.Tx
	conn *sqlx.Conn
}

// Begin starts the local transaction of one message. The transaction is rolled back by database/sql if
// ctx ends first. Errors (no connection, SET or BEGIN failed) are wrapped; they classify as transient
// when the connection was lost.
func (s *Store) Begin(ctx context.Context) (*Txn, error) {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("dedup: begin: connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("dedup: begin: autocommit off: %w", err)
	}
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		(&Txn{conn: conn}).release(false)
		return nil, fmt.Errorf("dedup: begin: %w", err)
	}
	return &Txn{Tx: tx, conn: conn}, nil
}

// Commit commits the transaction and returns the connection to the pool.
func (t *Txn) Commit() error {
	err := t.Tx.Commit()
	t.release(err == nil)
	return err
}

// Rollback rolls the transaction back (also what a transaction MySQL already ended may have started since)
// and returns the connection to the pool. sql.ErrTxDone means database/sql had already rolled it back.
func (t *Txn) Rollback() error {
	err := t.Tx.Rollback()
	t.release(false)
	return err
}

// release turns autocommit back on and returns the connection to the pool. Unless the transaction committed,
// it first rolls back whatever may still be open, since turning autocommit on commits an open transaction.
// A connection on which that fails is discarded rather than handed to other users with autocommit off.
func (t *Txn) release(committed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if !committed {
		_, err = t.conn.ExecContext(ctx, "ROLLBACK")
	}
	if err == nil {
		_, err = t.conn.ExecContext(ctx, "SET autocommit = 1")
	}
	if err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = t.conn.Close()
}

// Claim inserts the processed_event row of d (d.Group, d.EventID) in tx. It returns ErrDuplicate when the
// insert fails with MySQL 1062 on processed_event's primary key, i.e. the consumer group already processed
// the event (or another transaction holding the same key commits
// while Claim waits on its lock); MySQL 1205/1213 from that wait come back wrapped and classify as
// transient. Claim rejects an empty event ID, or one longer than MaxEventIDLength, as permanent.
func (s *Store) Claim(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) error {
	if d.EventID == "" || utf8.RuneCountInString(d.EventID) > MaxEventIDLength {
		return retry.Permanentf("dedup: event ID %q is empty or longer than %d characters", d.EventID, MaxEventIDLength)
	}
	if utf8.RuneCountInString(d.Group) > MaxGroupLength {
		return retry.Permanentf("dedup: consumer group %q is longer than %d characters", d.Group, MaxGroupLength)
	}
	_, err := tx.ExecContext(ctx,
		`INSERT INTO processed_event
		   (consumer_group, event_id, event_type, aggregate_id, topic, msg_id, consumed_at, result_status)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		d.Group, d.EventID, cut(d.EventType, MaxEventTypeLength), cut(d.AggregateID, MaxAggregateIDLength),
		d.Topic, d.Msg.MsgId, s.now().UTC(), ResultSuccess)
	if key, dup := retry.DuplicateKey(err); dup {
		// The insert touches processed_event only, whose one unique key is its primary key; a 1062 naming
		// another key means the table is not the schema this store expects.
		if key != dedupKey && key != "" {
			return fmt.Errorf("dedup: claim group %s event %s: duplicate on unexpected key %q of processed_event: %w",
				d.Group, d.EventID, key, err)
		}
		return fmt.Errorf("%w: group %s event %s", ErrDuplicate, d.Group, d.EventID)
	}
	if err != nil {
		return fmt.Errorf("dedup: claim group %s event %s: %w", d.Group, d.EventID, err)
	}
	return nil
}

// ErrClaimLost means the transaction no longer holds its processed_event row when it is about to commit:
// MySQL rolled the transaction back underneath the handler (a deadlock, 1213, rolls back the whole
// transaction, and statements after it run in a new one). Committing would apply the effect without its
// dedup row; the message is retried instead. It classifies as transient.
var ErrClaimLost = retry.Transient(errors.New("dedup: the transaction lost its processed_event row (rolled back under the handler, e.g. by a deadlock)"))

// Confirm checks, inside tx, that tx still holds d's processed_event row. Call it right before Commit.
// It returns an error wrapping ErrClaimLost when the row is gone, or the query's error.
func (s *Store) Confirm(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) error {
	var n int
	err := tx.GetContext(ctx, &n,
		`SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, d.Group, d.EventID)
	if err != nil {
		return fmt.Errorf("dedup: confirm group %s event %s: %w", d.Group, d.EventID, err)
	}
	if n != 1 {
		return fmt.Errorf("group %s event %s: %w", d.Group, d.EventID, ErrClaimLost)
	}
	return nil
}

// cut returns s cut to at most n characters.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Processed reports whether the consumer group has a committed processed_event row for eventID.
func (s *Store) Processed(ctx context.Context, group, eventID string) (bool, error) {
	var n int
	err := s.db.GetContext(ctx, &n,
		`SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, group, eventID)
	if err != nil {
		return false, fmt.Errorf("dedup: lookup group %s event %s: %w", group, eventID, err)
	}
	return n > 0, nil
}
