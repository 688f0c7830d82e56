package middleware

import (
	"context"
	"errors"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/retry"
)

// Metrics records every message in m after the rest of the chain: rmqguard_messages_total by outcome,
// rmqguard_duplicates_total, rmqguard_handle_duration_seconds, rmqguard_panics_total (errors wrapping
// ErrPanic), rmqguard_unidentifiable_total (errors wrapping ErrUnidentifiable) and
// rmqguard_handler_errors_total by retry class. Labels use the original topic (restored from RETRY_TOPIC).
func Metrics(m *metrics.Metrics) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			start := time.Now()
			o, err := next(ctx, d)
			m.HandleDuration.WithLabelValues(d.Group, d.Topic).Observe(time.Since(start).Seconds())
			m.Messages.WithLabelValues(d.Group, d.Topic, o.Kind.String()).Inc()
			if o.Kind == consumer.KindDuplicate {
				m.Duplicates.WithLabelValues(d.Group, d.Topic).Inc()
			}
			if err != nil {
				m.Errors.WithLabelValues(d.Group, d.Topic, retry.Classify(err).String()).Inc()
				if errors.Is(err, ErrPanic) {
					m.Panics.WithLabelValues(d.Group, d.Topic).Inc()
				}
				if errors.Is(err, ErrUnidentifiable) {
					m.Unidentifiable.WithLabelValues(d.Group, d.Topic).Inc()
				}
			}
			return o, err
		}
	}
}
