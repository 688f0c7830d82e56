package middleware

import (
	"context"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
)

// Timeout is Deadline for handlers that ignore their context: it runs the rest of the chain on a goroutine
// of its own and returns at deadline d (or the consumer's HandlerTimeout when earlier) with a retry, Cause
// "timeout". Chain refuses it outside Recover or beside Deadline. See the package doc, "Deadline
// and Timeout".
func Timeout(d time.Duration) Middleware {
	own := newOwnDeadline("middleware.Timeout", d)
	return Middleware{kind: kindTimeout, wrap: (&timeoutMW{d: d, own: own}).wrap}
}

// timeoutMW is a Timeout middleware; Chain knows it by its Middleware's kind.
type timeoutMW struct {
	d   time.Duration
	own *ownDeadline
}

func (w *timeoutMW) wrap(next consumer.Handler) consumer.Handler {
	d, own := w.d, w.own
	return consumer.HandlerFunc(func(ctx context.Context, dl *consumer.Delivery) (consumer.Outcome, error) {
		run := startRun(ctx, own)
		var cancel context.CancelFunc
		if d > 0 {
			ctx, cancel = run.withDeadline(ctx)
		} else {
			ctx, cancel = context.WithCancel(ctx)
		}
		defer cancel()
		call := &timeoutCall{Context: ctx, next: next, dl: dl, done: make(chan timeoutResult, 1)}
		go call.run()
		select {
		case r := <-call.done:
			return r.o, r.err
		case <-ctx.Done():
			if call.guard.abandon() {
				return run.expired(ctx, "handler did not return before its deadline", nil)
			}
			r := <-call.done // Dedup decided before the deadline (settle): its answer decides
			if final(r.o, r.err) {
				return r.o, nil
			}
			return run.expired(ctx, "handler returned after its deadline", r.err)
		}
	})
}

// timeoutCall is one message's run under Timeout, on a goroutine of its own. It is also the context the
// rest of the chain gets: its run's context, whose Value answers the commit guard's key (see commit.go).
type timeoutCall struct {
	context.Context
	guard commitGuard
	next  consumer.Handler
	dl    *consumer.Delivery
	done  chan timeoutResult // buffered: the goroutine never waits for Timeout
}

// timeoutResult is what the rest of the chain returned.
type timeoutResult struct {
	o   consumer.Outcome
	err error
}

// Value returns the run's commit guard for its key, else the run context's value.
func (c *timeoutCall) Value(key any) any {
	if key == (guardKey{}) {
		return &c.guard
	}
	return c.Context.Value(key)
}

// run runs the rest of the chain and sends its result; a panic is recovered and sent as a *PanicError
// carrying this goroutine's stack.
func (c *timeoutCall) run() {
	var r timeoutResult
	defer func() {
		if p := recover(); p != nil {
			r = timeoutResult{panicRetry(), newPanicError(p)}
		}
		c.done <- r
	}()
	r.o, r.err = c.next.Handle(c, c.dl)
}
