package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/pending"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// Lease is Dedup in lease mode (claim first), for a handler whose external call must happen before the
// commit: a lease of duration lease on the event is committed before the handler runs. lease must exceed
// HandlerTimeout; BatchSize > 1 is refused. A nil store or a lease ≤ 0 is an error. See the package doc,
// "Lease".
func Lease(store *dedup.Store, lease time.Duration) (Middleware, error) {
	if store == nil {
		return Middleware{}, fmt.Errorf("%w: middleware.Lease: store is nil — did dedup.NewStore fail? check its error", ErrNilDependency)
	}
	if lease <= 0 {
		return Middleware{}, fmt.Errorf("middleware.Lease: lease %s must be positive (longer than the handler's deadline)", lease)
	}
	proto := store.Protocol()
	leaser, ok := proto.(txproto.Leaser)
	if !ok {
		return Middleware{}, fmt.Errorf("middleware.Lease: the store's protocol %T has no leases", proto)
	}
	return Middleware{kind: kindLease, wrap: (&leaseMW{store: proto, leaser: leaser, lease: lease, level: delayLevelCovering(lease)}).wrap,
		store: store, lease: lease}, nil
}

// leaseMW is a Lease middleware; Chain knows it by its Middleware's kind.
type leaseMW struct {
	store  txproto.Store
	leaser txproto.Leaser // store's leases
	lease  time.Duration
	level  int // the broker delay level of a lease-held retry
}

// defaultDelayLevels are a default broker's delay levels 1..18 (messageDelayLevel).
var defaultDelayLevels = [...]time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute,
	8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// delayLevelCovering returns the first default delay level at least d long, or the last (2 h).
func delayLevelCovering(d time.Duration) int {
	for i, l := range defaultDelayLevels {
		if l >= d {
			return i + 1
		}
	}
	return len(defaultDelayLevels)
}

func (w *leaseMW) wrap(next consumer.Handler) consumer.Handler {
	store := w.store
	if next == nil { // composed by hand around nothing
		return pending.Refuse[consumer.Delivery](errNilNext, consumer.DeadLetter)
	}
	held := fmt.Sprintf("lease held by another delivery of the event (its handler is running, or stopped less than %s ago)", w.lease)
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (o consumer.Outcome, err error) {
		if d.EventID == "" {
			return consumer.Outcome{}, retry.Permanent(fmt.Errorf("lease: %w (put middleware.EventID before middleware.Lease)", ErrUnidentifiable))
		}
		if batch.FromContext[consumer.Outcome, string](ctx) != nil {
			return consumer.Outcome{}, retry.Permanent(errors.New("middleware.Lease does not run in batches: set consumer.Config.BatchSize to 1"))
		}
		lease, err := w.leaser.ClaimLease(ctx, d, w.lease)
		if errors.Is(err, dedup.ErrLeaseHeld) {
			o := consumer.Retry(w.level, held)
			o.Cause = causelabel.LeaseHeld
			return o, nil
		}
		if err != nil {
			return consumer.Outcome{}, err
		}
		// end is what happens to the lease when the run ends without a commit: expired (the next delivery
		// takes it over) unless the run decides otherwise; a panic leaves it at Expire. release is the end of
		// a run that failed on its own: after a takeover it keeps the lease, expired, since the holder that
		// died may have made the call and the next delivery must be told so too.
		end := lease.Expire
		release := lease.Release
		lctx := txproto.WithLease(ctx, lease)
		if lease.Takeover() {
			release = lease.Expire
		}
		defer func() {
			if end != nil {
				_ = end(ctx) // on failure the lease expires at its time
			}
		}()
		txn, err := store.Begin(ctx)
		if err != nil {
			end = release
			return consumer.Outcome{}, err
		}
		defer func() { _ = txn.RollbackAfter(err) }() // runs before end: the lease row's lock is gone
		if err := store.Claim(ctx, txn, d); err != nil {
			end = release
			if errors.Is(err, dedup.ErrDuplicate) {
				end = lease.Release // the event is done: no trace to keep
				return duplicate(ctx, store, txn, d), nil
			}
			return consumer.Outcome{}, err
		}
		hctx := txproto.WithTxn(lctx, txn)
		o, err = next.Handle(hctx, d)
		if err == nil && o.Kind == consumer.KindStale {
			end = release
			return stale(ctx, store, txn, d, o)
		}
		if err != nil || (o.Kind != consumer.KindProcessed && o.Kind != consumer.KindDuplicate) {
			if ctx.Err() == nil && !unknownEffect(o, err) {
				end = release // the handler's own failure
			}
			return o, err
		}
		// The handler succeeded: its call may have happened, so from here a failure keeps the lease, expired.
		// The lease row is deleted last, so that while the handler runs the row is not locked and another
		// delivery learns at once that the lease is held.
		if err := lease.Hold(ctx, txn); err != nil {
			if errors.Is(err, dedup.ErrClaimLost) {
				end = nil // another delivery's now
			}
			return consumer.Outcome{}, err
		}
		if err := store.Confirm(ctx, txn, d); err != nil {
			return consumer.Outcome{}, err
		}
		if !settle(ctx) {
			return consumer.Outcome{}, abandoned(ctx, d)
		}
		if err := txn.Commit(); err != nil {
			return consumer.Outcome{}, fmt.Errorf("lease: commit group %s event %s: %w", d.Group, d.EventID, err)
		}
		end = nil // deleted with the commit
		o.Committed = true
		if lease.Takeover() && o.Kind == consumer.KindProcessed {
			o.Cause = causelabel.Takeover
		}
		return o, nil
	})
}

// unknownEffect reports whether a run that failed may have made its call all the same: it ended at a
// deadline or was cancelled (a Deadline inside Lease, the handler's own client timing out), panicked (a
// Recover inside Lease), or met an outage (an infrastructure error: its writes failed after the call).
// Its lease is then expired, not released, so the next delivery is told.
func unknownEffect(o consumer.Outcome, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		(err != nil && retry.Classify(err) == retry.ClassInfrastructure) ||
		o.Cause == causelabel.Timeout || o.Cause == causelabel.Panic
}
