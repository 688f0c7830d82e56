package middleware

import (
	"context"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// Classify turns an error from the rest of the chain into an outcome with retry.Classify: a permanent
// error becomes consumer.DeadLetter (to %DLQ%<group> at once, the error as its reason); a transient or
// unknown one becomes consumer.Retry, keeping a delay level the inner outcome asked for. On the last
// delivery (Delivery.LastAttempt) a retry — asked for, from an error, or the zero Outcome — becomes
// consumer.DeadLetter with the reason "retries exhausted …", so that the dead letter is counted and carries
// its reason instead of being moved to the DLQ silently by the broker. The error is passed on for logging;
// an outcome already set to dead letter is kept; a success without error is unchanged.
func Classify() consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			o, err := next(ctx, d)
			if o.Kind == consumer.KindDeadLetter || (err == nil && o.Kind.Acknowledges()) {
				return o, err
			}
			if err != nil {
				if retry.Classify(err) == retry.ClassPermanent {
					return consumer.DeadLetter(err.Error()), err
				}
				delay := 0
				if o.Kind == consumer.KindRetry {
					delay = o.DelayLevel
				}
				o = consumer.Retry(delay, err.Error())
			}
			if d.LastAttempt() {
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
