package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// Deadline gives the rest of the chain a context deadline d (or the consumer's HandlerTimeout when earlier;
// d ≤ 0: that one only) and runs it inline: a run that outlives it without a commit is a retry with Cause
// "timeout". It costs no goroutine; the handler must honour its context. See the package doc,
// "Deadline and Timeout".
func Deadline(d time.Duration) Middleware {
	own := newOwnDeadline("middleware.Deadline", d)
	return Middleware{kind: kindDeadline, wrap: (&deadlineMW{own: own}).wrap}
}

// deadlineMW is a Deadline middleware; Chain knows it by its Middleware's kind.
type deadlineMW struct{ own *ownDeadline }

func (w *deadlineMW) wrap(next consumer.Handler) consumer.Handler {
	own := w.own
	return consumer.HandlerFunc(func(ctx context.Context, dl *consumer.Delivery) (consumer.Outcome, error) {
		run := startRun(ctx, own)
		if run.ownIsEarlier() {
			var cancel context.CancelFunc
			ctx, cancel = run.withDeadline(ctx)
			defer cancel()
		}
		o, err := next.Handle(ctx, dl)
		if ctx.Err() == nil || final(o, err) {
			return o, err
		}
		return run.expired(ctx, "handler returned after its deadline", err)
	})
}

// ownDeadline is the deadline a middleware sets itself: its name for errors, e.g. "middleware.Deadline(10s)",
// and the cause it gives the context (wrapping context.DeadlineExceeded), by which context.Cause tells it
// apart from the parent's. Made once per middleware, it costs nothing per message.
type ownDeadline struct {
	d          time.Duration // ≤ 0: none
	middleware string        // e.g. "middleware.Deadline"
	name       string        // e.g. "middleware.Deadline(10s)"
	cause      error
}

// newOwnDeadline describes the deadline d of the middleware named, e.g., "middleware.Deadline".
func newOwnDeadline(middleware string, d time.Duration) *ownDeadline {
	name := fmt.Sprintf("%s(%s)", middleware, d)
	return &ownDeadline{d: d, middleware: middleware, name: name, cause: fmt.Errorf("%s fired: %w", name, context.DeadlineExceeded)}
}

// deadlineRun is what Deadline and Timeout know about the deadlines of one message's run.
type deadlineRun struct {
	own    *ownDeadline
	start  time.Time // when the message reached the middleware
	parent time.Time // the parent context's deadline; zero when it has none
}

// startRun records the start of a run and the parent's deadline, if any.
func startRun(ctx context.Context, own *ownDeadline) deadlineRun {
	parent, _ := ctx.Deadline()
	return deadlineRun{own: own, start: time.Now(), parent: parent}
}

// ownIsEarlier reports whether the middleware's own deadline comes before the parent's: only then does
// the run need a context of its own (when the consumer's HandlerTimeout ends first, Deadline allocates
// nothing).
func (r deadlineRun) ownIsEarlier() bool {
	return r.own.d > 0 && (r.parent.IsZero() || r.start.Add(r.own.d).Before(r.parent))
}

// withDeadline derives the run's context: the deadline start + d with the own cause, or the parent's when
// that is earlier (the context package keeps the earlier one).
func (r deadlineRun) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadlineCause(ctx, r.start.Add(r.own.d), r.own.cause)
}

// expired is the outcome and error of a run whose context ended; what says how the handler missed it, late
// is the handler's error if it returned one (kept as text). Cancelled (the consumer is stopping): a retry
// "handler cancelled", the error wrapping context.Canceled. Else a retry with Cause "timeout",
// the error naming the deadline that fired and wrapping context.DeadlineExceeded.
func (r deadlineRun) expired(ctx context.Context, what string, late error) (consumer.Outcome, error) {
	if errors.Is(ctx.Err(), context.Canceled) {
		return consumer.Retry(0, "handler cancelled"), fmt.Errorf("handler cancelled (consumer stopping): %w", ctx.Err())
	}
	timedOut := consumer.Retry(0, "handler timeout")
	timedOut.Cause = causelabel.Timeout
	if late != nil && late != ctx.Err() { // the context's own error would only repeat what the error says
		return timedOut, fmt.Errorf("%s, %s: %w (the handler returned: %v)", what, r.fired(ctx), context.DeadlineExceeded, late)
	}
	return timedOut, fmt.Errorf("%s, %s: %w", what, r.fired(ctx), context.DeadlineExceeded)
}

// fired names the deadline that ended ctx: the middleware's own, or the parent context's (the consumer's
// HandlerTimeout) with the time it had left when the message reached the middleware.
func (r deadlineRun) fired(ctx context.Context) string {
	if r.own.d > 0 && context.Cause(ctx) == r.own.cause {
		return r.own.name
	}
	if r.parent.IsZero() {
		return "the parent context's"
	}
	return fmt.Sprintf("the parent context's (the consumer's HandlerTimeout: %s left when the message reached %s)",
		r.parent.Sub(r.start).Round(time.Millisecond), r.own.middleware)
}
