package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// Classify turns an error from the rest of the chain into an outcome with retry.Classify:
//
//   - permanent → consumer.DeadLetter (to %DLQ%<group> at once, the error as its reason);
//   - infrastructure (the store is down or unwritable) → consumer.Unavailable, on every delivery, the
//     last one included: the consumer pauses consumption and handles the message again when the store
//     is back, without spending an attempt (an attempt is spent only by the message's own failure);
//   - transient or unknown → consumer.Retry, keeping a delay level the inner outcome asked for.
//
// On the last delivery (Delivery.LastAttempt) a retry — asked for, from an error, or the zero Outcome —
// becomes consumer.DeadLetter with the reason "retries exhausted …", so that the dead letter is counted and
// carries its reason instead of being moved to the DLQ silently by the broker; except when ctx was
// cancelled (the consumer is shutting down: the message is not answered and comes back as it was). The
// error is passed on for logging; an outcome already set to dead letter or unavailable is kept; a success
// without error is unchanged.
func Classify() consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			o, err := next(ctx, d)
			if o.Kind == consumer.KindDeadLetter || o.Kind == consumer.KindUnavailable || (err == nil && o.Kind.Acknowledges()) {
				return o, err
			}
			if err != nil {
				switch retry.Classify(err) {
				case retry.ClassPermanent:
					return consumer.DeadLetter(err.Error()), err
				case retry.ClassInfrastructure:
					return consumer.Unavailable(err.Error()), err
				}
				delay := 0
				if o.Kind == consumer.KindRetry {
					delay = o.DelayLevel
				}
				o = consumer.Retry(delay, err.Error())
			}
			if d.LastAttempt() && !errors.Is(ctx.Err(), context.Canceled) {
				reason := o.Reason
				if reason == "" {
					reason = "no outcome"
				}
				return consumer.DeadLetter(fmt.Sprintf("retries exhausted after %d deliveries: %s", d.Attempt+1, reason)), err
			}
			return o, err
		}
	}
}
