package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
)

// Timeout gives the rest of the chain a context deadline d (or keeps an earlier one) and returns when it
// passes, even if the handler ignores its context: the outcome is then a retry (Cause consumer.CauseTimeout)
// and the error wraps context.DeadlineExceeded. A transaction begun with that context is rolled back by database/sql when
// the deadline passes, so nothing the late handler writes can commit; in a batch (consumer.Config.BatchSize
// > 1) the members share a transaction begun with the batch's context instead, and Dedup loses it when a
// member was abandoned still running, so nothing commits then either. The late handler's goroutine ends
// when the handler returns; handlers must honour ctx to end promptly and must not modify the Delivery.
// A panic in the inner chain is recovered on the handler's goroutine and returned as a *PanicError (wrapping
// ErrPanic) that carries that goroutine's stack, for Recover to log. With d ≤ 0 only the parent's
// deadline (the consumer's HandlerTimeout) applies, still enforced.
func Timeout(d time.Duration) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, dl *consumer.Delivery) (consumer.Outcome, error) {
			var cancel context.CancelFunc
			if d > 0 {
				ctx, cancel = context.WithTimeout(ctx, d)
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
				if errors.Is(ctx.Err(), context.Canceled) {
					return consumer.Retry(0, "handler cancelled"), fmt.Errorf("handler cancelled (consumer stopping): %w", ctx.Err())
				}
				timedOut := consumer.Retry(0, "handler timeout")
				timedOut.Cause = consumer.CauseTimeout
				return timedOut, fmt.Errorf("handler did not return before its deadline (timeout %s): %w", d, ctx.Err())
			}
		}
	}
}
