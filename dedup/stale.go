package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// RecordStale records that d's event was decided stale: it inserts d's processed_event row with
// result_status ResultStale (and no claim token) in a short transaction of its own — call it after the
// event's transaction rolled back, so that nothing the handler wrote survives and only the decision is kept.
// As for a message's own transaction, the INSERT ends with ctx (nothing commits then) but a COMMIT once
// sent is waited for even when ctx ends meanwhile: the row is there exactly when RecordStale returns nil,
// so a deadline never turns a recorded decision into a failure (F39). A later delivery of the same event ID in the scope then claims a 1062 and is a
// duplicate (S7, F12). A 1062 here means the scope already has a row for the event (a concurrent delivery
// recorded or processed it first, while this one decided): RecordStale then returns an error wrapping
// ErrDuplicate, and middleware.Dedup reports this delivery as a duplicate, so that one event counts as
// stale once. It returns the other errors of the insert, wrapped (a retry: the decision must be kept
// before the message is acknowledged), and rejects an empty or too long event ID as permanent, like Claim.
// The store's own failures — no connection, a connection lost, a read-only server — are marked (or
// classify as) retry.Infrastructure, as a failed BEGIN or COMMIT is, unless ctx ended: not the message's
// failure, so no attempt is spent on them. It runs on a connection of its own, which is closed, not
// returned to the pool, when it met a read-only server.
func (s *Store) RecordStale(ctx context.Context, d *consumer.Delivery) error {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return beginFailed(ctx, fmt.Errorf("dedup: record stale: connection: %w", err))
	}
	err = s.recordStale(ctx, conn, d)
	if retry.ReadOnly(err) {
		discard(conn)
	} else {
		_ = conn.Close()
	}
	if err != nil {
		return recordFailed(ctx, fmt.Errorf("dedup: record stale: %w", err))
	}
	return nil
}

// recordFailed marks a failed insert of a STALE row as infrastructure when the server gave no answer of
// its own (no MySQL error: the connection failed) and neither ctx ended nor err is ErrDuplicate or
// permanent; a MySQL error keeps its number's class (1290 is infrastructure already, a trigger's SIGNAL
// is retried).
func recordFailed(ctx context.Context, err error) error {
	var me *mysql.MySQLError
	if errors.Is(err, ErrDuplicate) || ctx.Err() != nil || retry.IsPermanent(err) || errors.As(err, &me) {
		return err
	}
	return retry.Infrastructure(err)
}

// recordStale inserts d's STALE row on conn in a transaction of its own (see RecordStale).
func (s *Store) recordStale(ctx context.Context, conn *sqlx.Conn, d *consumer.Delivery) error {
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if err := s.insertRow(ctx, tx, d, ResultStale, ""); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
