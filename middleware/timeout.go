package middleware

import (
	"context"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
)

// Timeout is the deadline only for handlers that ignore their context: it runs the rest of the chain on a
// goroutine of its own (one per message) and returns at the deadline even if the handler has not. Handlers
// that honour their context (Dedup and database/sql calls made with ctx do) need only the consumer's
// Config.HandlerTimeout, or Deadline, which costs no goroutine.
//
// It gives the rest of the chain a context deadline d (or keeps the parent's, the consumer's HandlerTimeout,
// when that is earlier). When a deadline passes first, the outcome is a retry (Cause consumer.CauseTimeout,
// reason "handler timeout") and the error wraps context.DeadlineExceeded and names the deadline that fired:
// "middleware.Timeout(<d>)", or the parent context's with the time it had left when the message reached
// Timeout. When the parent is cancelled first (the consumer is stopping), the outcome is a retry "handler
// cancelled" wrapping context.Canceled. A transaction begun with that context is rolled back by
// database/sql when the deadline passes, so nothing the late handler writes can commit. The late
// handler's goroutine ends when the handler returns; handlers must not modify the Delivery. A panic in the
// inner chain is recovered on the handler's goroutine and returned as a *PanicError (wrapping ErrPanic)
// that carries that goroutine's stack, for Recover to log. With d ≤ 0 only the parent's deadline applies,
// still enforced. In a batch (consumer.Config.BatchSize > 1) the members share a transaction begun with the
// batch's context instead, and Dedup loses it when a member was abandoned still running, so nothing commits
// then either. Chain refuses Timeout outside Recover, and Timeout together with Deadline.
func Timeout(d time.Duration) consumer.Middleware {
	own := newOwnDeadline("middleware.Timeout", d)
	return (&timeoutMW{d: d, own: own}).wrap
}

// timeoutMW is a Timeout middleware; its wrap method value identifies it to Chain.
type timeoutMW struct {
	d   time.Duration
	own *ownDeadline
}

func (w *timeoutMW) wrap(next consumer.Handler) consumer.Handler {
	d, own := w.d, w.own
	return func(ctx context.Context, dl *consumer.Delivery) (consumer.Outcome, error) {
		run := startRun(ctx, own)
		var cancel context.CancelFunc
		if d > 0 {
			ctx, cancel = run.withDeadline(ctx)
		} else {
			ctx, cancel = context.WithCancel(ctx)
		}
		defer cancel()
		type result struct {
			o   consumer.Outcome
			err error
		}
		done := make(chan result, 1)
		go func() {
			var r result
			defer func() {
				if p := recover(); p != nil {
					r = result{panicRetry(), newPanicError(p)}
				}
				done <- r
			}()
			r.o, r.err = next(ctx, dl)
		}()
		select {
		case r := <-done:
			return r.o, r.err
		case <-ctx.Done():
			return run.expired(ctx, "handler did not return before its deadline", nil)
		}
	}
}
