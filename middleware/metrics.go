package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/retry"
)

// Metrics records in m what only the chain knows, after the rest of the chain: the chain's time per run
// (rmqguard_handle_duration_seconds), recovered panics (rmqguard_panics_total: errors wrapping ErrPanic),
// unidentifiable messages (rmqguard_unidentifiable_total: errors wrapping ErrUnidentifiable) and handler
// errors by retry class (rmqguard_handler_errors_total). It does not count messages or duplicates: the
// consumer reports each message's final decision once (consumer.WithObserver(m) feeds
// rmqguard_messages_total, rmqguard_duplicates_total, rmqguard_dead_letters_total …), after a batch is
// combined and dead letters are published. Labels use the original topic (restored from RETRY_TOPIC).
// In a batch's first pass the run ends at Dedup, which defers the handler to the batch's end (its errors
// are met again in the careful pass that follows them). Each chain keeps the
// rmqguard_handle_duration_seconds series of the (group, topic) pairs it has seen (up to 256), so a message
// costs no label lookup; those series must not be deleted from m.HandleDuration.
// A nil m is an error wrapping ErrNilDependency.
func Metrics(m *metrics.Metrics) (Middleware, error) {
	if m == nil {
		return Middleware{}, fmt.Errorf("%w: middleware.Metrics: m is nil: pass the *metrics.Metrics you registered, or leave Metrics out", ErrNilDependency)
	}
	return Middleware{kind: kindMetrics, wrap: (&metricsMW{m: m}).wrap}, nil
}

// metricsMW is a Metrics middleware; Chain knows it by its Middleware's kind.
type metricsMW struct{ m *metrics.Metrics }

func (w *metricsMW) wrap(next consumer.Handler) consumer.Handler {
	m := w.m
	durations := newDurationSeries(m.HandleDuration)
	return func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		start := time.Now()
		o, err := next(ctx, d)
		durations.observer(d.Group, d.Topic).Observe(time.Since(start).Seconds())
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
