package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/retry"
)

// RecordStale records that d's event was decided stale: d's processed_event row with result_status
// "STALE", in a short transaction of its own; call it after the event's transaction rolled back (the
// package doc, "Stale events"). Errors: one wrapping ErrDuplicate when the scope already has the row; the
// store's own failures, marked retry.Infrastructure unless ctx ended; the insert's other errors, wrapped;
// an empty or too long event ID, permanent, as for Claim.
func (s storeProtocol) RecordStale(ctx context.Context, d *consumer.Delivery) error {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return beginFailed(ctx, fmt.Errorf("dedup: record stale: connection: %w", err))
	}
	err = s.recordStale(ctx, conn, d)
	if mysqlerr.ReadOnly(err) {
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
	if errors.Is(err, ErrDuplicate) || ctx.Err() != nil || retry.Classify(err) == retry.ClassPermanent || errors.As(err, &me) {
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
	if err := s.insertRow(ctx, tx, d, dedupsql.ResultStale, ""); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
