package middleware

import (
	"context"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// Classify turns an error from the rest of the chain into an outcome with retry.Classify: a permanent
// error becomes consumer.DeadLetter (to %DLQ%<group> at once, the error as its reason); a transient or
// unknown one becomes consumer.Retry, keeping a delay level the inner outcome asked for. The broker
// dead-letters a message that is still retried after MaxReconsumeTimes. The error is passed on for
// logging; an outcome already set to dead letter is kept. Without an error the outcome is unchanged.
func Classify() consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			o, err := next(ctx, d)
			if err == nil || o.Kind == consumer.KindDeadLetter {
				return o, err
			}
			if retry.Classify(err) == retry.ClassPermanent {
				return consumer.DeadLetter(err.Error()), err
			}
			delay := 0
			if o.Kind == consumer.KindRetry {
				delay = o.DelayLevel
			}
			return consumer.Retry(delay, err.Error()), err
		}
	}
}
