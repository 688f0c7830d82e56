package shop

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/dedup"
)

// CompensationReport counts what one CancelUnpaid pass did with its orders.
type CompensationReport struct {
	// Cancelled lists the orders this pass cancelled (and whose stock it released).
	Cancelled []string
	// Moved lists the orders already past WAIT_PAY at version 2 (cancelled by their OrderCancelled
	// message, or paid): the job leaves them alone.
	Moved []string
	// Pending lists the orders not created yet (their OrderCreated has not been consumed): try them again.
	Pending []string
}

// CancelUnpaid is the demo's order-timeout compensation job: it cancels each of orderNos that is still
// WAIT_PAY (version 1 → 2) and releases its stock, each order in a transaction of its own (READ COMMITTED:
// no gap locks held on orders not created yet), not through the consumer. It runs the same steps as the
// OrderCancelled handler, so when both handle one order concurrently exactly one of them cancels it and
// one release is recorded (S6). A real job would select WAIT_PAY orders past their payment deadline; the
// demo names the orders so that it races their OrderCancelled messages. An order in a status that cannot
// be cancelled at version 1 (illegal) counts as moved. Errors stop the pass and name the order.
func (s *Shop) CancelUnpaid(ctx context.Context, db *sqlx.DB, orderNos []string) (CompensationReport, error) {
	var r CompensationReport
	for _, no := range orderNos {
		res, err := s.cancelOne(ctx, db, no)
		if err != nil {
			return r, err
		}
		switch res {
		case dedup.TransitionApplied:
			r.Cancelled = append(r.Cancelled, no)
		case dedup.TransitionAhead, dedup.TransitionMissing:
			r.Pending = append(r.Pending, no)
		default:
			r.Moved = append(r.Moved, no)
		}
	}
	return r, nil
}

// cancelOne cancels one order in its own transaction, committed only when the cancellation applied.
func (s *Shop) cancelOne(ctx context.Context, db *sqlx.DB, orderNo string) (dedup.TransitionResult, error) {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("shop: compensation: begin for order %s: %w", orderNo, err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := s.cancel(ctx, tx, orderNo, VersionSettled)
	if err != nil || res != dedup.TransitionApplied {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("shop: compensation: commit cancellation of order %s: %w", orderNo, err)
	}
	return res, nil
}
