package dedup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// Lease mode (middleware.Lease) is for handlers whose external call must happen before the commit because
// its answer is written (charge a card, store the charge ID), and which the other side cannot dedup. A
// lease row (the event_lease table) is committed before the handler runs; the handler's own transaction
// deletes it and inserts the processed_event row, so that "done" commits with the business writes, and
// processed_event keeps meaning "decided" for every reader (Processed, Purge, duplicate causes, the
// read-back of a lost COMMIT). A lease row left behind is the trace of a run that may have made its call.

// ErrLeaseHeld means another delivery of the event holds a live lease: its handler is running, or died
// less than the lease's duration ago. The delivery is retried later (middleware.Lease), never acknowledged.
var ErrLeaseHeld = errors.New("dedup: lease held by another delivery of the event")

// maxLeaseClaims bounds ClaimLease's insert-or-take-over loop when the row comes and goes between its
// statements (its holder committing or releasing meanwhile).
const maxLeaseClaims = 3

// lease is a delivery's committed claim on its event in lease mode (txproto.Lease); see ClaimLease.
type lease struct {
	s              *Store
	scope, eventID string
	token          string
	takeover       bool
}

// ClaimLease commits, in a transaction of its own, a lease of duration dur on d's event: a new lease row, or
// an expired one taken over (Takeover then reports true; the package doc, "Leases"). Errors: ErrLeaseHeld
// (wrapped) while another delivery holds a live lease; an empty or too long event ID or scope, permanent; a
// missing lease table, ErrSchema (wrapped) marked infrastructure; the store's own failures,
// retry.Infrastructure unless ctx ended.
func (s storeProtocol) ClaimLease(ctx context.Context, d *consumer.Delivery, dur time.Duration) (txproto.Lease, error) {
	if d.EventID == "" || utf8.RuneCountInString(d.EventID) > maxEventIDLength {
		return nil, retry.Permanentf("dedup: event ID %q is empty or longer than %d characters", d.EventID, maxEventIDLength)
	}
	scope := s.scopeOf(d)
	if utf8.RuneCountInString(scope) > maxGroupLength {
		return nil, retry.Permanentf("dedup: consumer group %q is longer than %d characters", scope, maxGroupLength)
	}
	if dur <= 0 {
		return nil, retry.Permanentf("dedup: lease duration %s is not positive", dur)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("dedup: lease: token: %w", err)
	}
	l := &lease{s: s.Store, scope: scope, eventID: d.EventID, token: hex.EncodeToString(raw[:])}
	us := dur.Microseconds()
	for range maxLeaseClaims {
		_, err := s.execOwn(ctx, s.q.leaseClaim, scope, d.EventID, l.token, d.Msg.MsgId, us)
		if err == nil || l.mine(ctx, err) {
			return l, nil
		}
		if mysqlerr.MissingTable(err) {
			return nil, retry.Infrastructure(fmt.Errorf("%w: the lease table %s is missing; fix: run dedup.Migrate%s (%w)",
				ErrSchema, s.tables.lease(), s.tables.migrateHint(), err))
		}
		if key, dup := mysqlerr.DuplicateKey(err); !dup || (key != dedupKey && key != "") {
			return nil, recordFailed(ctx, fmt.Errorf("dedup: claim lease scope %s event %s: %w", scope, d.EventID, err))
		}
		n, err := s.execOwn(ctx, s.q.leaseTake, l.token, d.Msg.MsgId, us, scope, d.EventID)
		if err != nil && l.mine(ctx, err) {
			n, err = 1, nil
		}
		if err != nil {
			return nil, recordFailed(ctx, fmt.Errorf("dedup: take over lease scope %s event %s: %w", scope, d.EventID, err))
		}
		if n == 1 {
			l.takeover = true
			return l, nil
		}
		// 0 rows: a live lease, or the row went away between the two statements (its holder committed or
		// released): insert again to tell them apart.
		var live int
		if err := s.db.GetContext(ctx, &live, s.q.leaseRead, scope, d.EventID); err != nil {
			return nil, recordFailed(ctx, fmt.Errorf("dedup: read lease scope %s event %s: %w", scope, d.EventID, err))
		}
		if live > 0 {
			return nil, fmt.Errorf("%w: scope %s event %s", ErrLeaseHeld, scope, d.EventID)
		}
	}
	return nil, fmt.Errorf("%w: scope %s event %s (claimed and released %d times meanwhile)", ErrLeaseHeld, scope, d.EventID, maxLeaseClaims)
}

// mine reports, after a lease statement failed with err, whether its transaction committed all the same:
// err may hide a commit (the COMMIT's answer was lost, see answerLost) and the lease row carries l's token
// (a locking read, so that a commit still under way is waited for; readBackTimeout of its own).
func (l *lease) mine(ctx context.Context, err error) bool {
	if !answerLost(err) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	var n int
	return l.s.db.GetContext(ctx, &n, l.s.q.leaseMine, l.scope, l.eventID, l.token) == nil && n == 1
}

// execOwn runs one statement in a short transaction of its own on db and returns the rows it affected
// (an explicit transaction, as RecordStale, so that it commits whatever db's autocommit setting).
func (s *Store) execOwn(ctx context.Context, query string, args ...any) (int64, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		_ = tx.Rollback()
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		_ = tx.Rollback()
		return 0, err
	}
	return n, tx.Commit()
}

// Hold deletes the lease row inside txn, the event's transaction, right before its commit, so that the
// lease ends exactly when txn commits its processed_event row and business writes (and is back, still this
// delivery's, if txn rolls back). It returns an error wrapping ErrClaimLost (transient) when the row is no
// longer this lease's (another delivery took it over after it expired), or the statement's error.
func (l *lease) Hold(ctx context.Context, pt txproto.Txn) error {
	txn, err := local(pt)
	if err != nil {
		return err
	}
	res, err := txn.Tx.ExecContext(ctx, l.s.q.leaseHold, l.scope, l.eventID, l.token)
	if err != nil {
		return fmt.Errorf("dedup: hold lease scope %s event %s: %w", l.scope, l.eventID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return retry.Transient(&leaseLost{scope: l.scope, eventID: l.eventID, err: err})
	}
	return nil
}

// leaseLost is Hold's error when the lease row is no longer the lease's; it is ErrClaimLost (errors.Is).
type leaseLost struct {
	scope, eventID string
	err            error // reading the rows affected, if that failed
}

func (e *leaseLost) Error() string {
	msg := fmt.Sprintf("dedup: the lease of scope %s event %s was taken over by another delivery after it expired", e.scope, e.eventID)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *leaseLost) Is(target error) bool { return target == ErrClaimLost }
func (e *leaseLost) Unwrap() error        { return e.err }

// Release deletes the lease row after the event's transaction rolled back, when the handler's failure is
// its own (its external call did not take effect, or may be repeated): the retry claims a new lease and is
// not a takeover. A failed Release leaves the lease to expire. It runs with a context of its own (5 s), as
// ctx may have ended.
func (l *lease) Release(ctx context.Context) error {
	return l.end(ctx, l.s.q.leaseRelease, "release")
}

// Expire ends the lease now but keeps its row, after a run whose effect is unknown (the handler returned
// without its transaction committing: a deadline, a panic, a failed COMMIT): the next delivery takes it
// over at once and is told so (Takeover). A failed Expire leaves the lease to expire at its time.
func (l *lease) Expire(ctx context.Context) error {
	return l.end(ctx, l.s.q.leaseExpire, "expire")
}

func (l *lease) end(ctx context.Context, query, what string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := l.s.execOwn(ctx, query, l.scope, l.eventID, l.token); err != nil {
		return fmt.Errorf("dedup: %s lease scope %s event %s: %w", what, l.scope, l.eventID, err)
	}
	return nil
}

// Takeover reports whether the lease was taken over from an earlier delivery that never finished.
func (l *lease) Takeover() bool { return l.takeover }

// Takeover reports whether the message being handled (ctx) holds a lease taken over from an earlier
// delivery that never finished: that delivery may have made the external call, so the handler should ask
// the other side before calling again. False outside lease mode (middleware.Lease).
func Takeover(ctx context.Context) bool {
	l, ok := txproto.LeaseFrom(ctx)
	return ok && l.Takeover()
}
