package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/retry"
)

// Classify turns an error from the rest of the chain into an outcome with retry.Classify: permanent →
// dead letter at once, infrastructure → consumer.Unavailable, other → retry; on the last delivery a retry
// becomes a dead letter "retries exhausted …". See the package doc, "Classify".
func Classify() Middleware {
	return Middleware{kind: kindClassify, wrap: (&classifyMW{}).wrap}
}

// classifyMW is the middleware of Classify; Chain knows it by its Middleware's kind.
type classifyMW struct{}

func (w *classifyMW) wrap(next consumer.Handler) consumer.Handler {
	return &classifyHandler{next: next}
}

// classifyHandler is the handler a classifyMW wraps around next.
type classifyHandler struct {
	next consumer.Handler
}

func (h *classifyHandler) Handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	o, err := h.next.Handle(ctx, d)
	if o.Kind == consumer.KindDeadLetter && o.Cause == "" && err != nil {
		return withCause(o, permanentCause(err)), err
	}
	if o.Kind == consumer.KindDeadLetter || o.Kind == consumer.KindUnavailable || (err == nil && o.Kind.Acknowledges()) {
		return o, err
	}
	if err != nil {
		switch retry.Classify(err) {
		case retry.ClassPermanent:
			return withCause(consumer.DeadLetter(err.Error()), permanentCause(err)), err
		case retry.ClassInfrastructure:
			return consumer.Unavailable(err.Error()), err
		}
		delay := 0
		if o.Kind == consumer.KindRetry {
			delay = o.DelayLevel
		}
		o = withCause(consumer.Retry(delay, err.Error()), o.Cause)
	}
	if d.LastAttempt() && !errors.Is(ctx.Err(), context.Canceled) {
		return exhausted(d, o, err), err
	}
	return o, err
}

// withCause returns o with its Cause set to c.
func withCause(o consumer.Outcome, c string) consumer.Outcome {
	o.Cause = c
	return o
}

// permanentCause is the reason class of a permanent error: unidentifiable when it wraps ErrUnidentifiable.
func permanentCause(err error) string {
	if errors.Is(err, ErrUnidentifiable) {
		return causelabel.Unidentifiable
	}
	return causelabel.Permanent
}

// exhausted is the dead letter of a retry o (with err) on d's last delivery: "retries exhausted after N
// deliveries: <o's reason>", its Cause from exhaustedCause.
func exhausted(d *consumer.Delivery, o consumer.Outcome, err error) consumer.Outcome {
	reason := o.Reason
	if reason == "" {
		reason = "no outcome"
	}
	letter := consumer.DeadLetter(fmt.Sprintf("retries exhausted after %d deliveries: %s", d.Attempt+1, reason))
	return withCause(letter, exhaustedCause(o, err))
}

// exhaustedCause is the reason class of a retry on the last delivery: the retry's own cause (Recover and
// Timeout set panic and timeout), else panic or timeout from the error, else exhausted.
func exhaustedCause(o consumer.Outcome, err error) string {
	switch {
	case o.Cause != "":
		return o.Cause
	case errors.Is(err, ErrPanic):
		return causelabel.Panic
	case errors.Is(err, context.DeadlineExceeded):
		return causelabel.Timeout
	}
	return causelabel.Exhausted
}
