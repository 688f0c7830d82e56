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

// Metrics records in m what only the chain sees: handle duration, recovered panics, unidentifiable
// messages and handler errors by class (messages and duplicates are counted by the consumer's Observer). A
// nil m is an error wrapping ErrNilDependency. See the package doc, "Metrics".
func Metrics(m *metrics.Metrics) (Middleware, error) {
	if m == nil {
		return Middleware{}, fmt.Errorf("%w: middleware.Metrics: m is nil: pass the *metrics.Metrics you registered, or leave Metrics out", ErrNilDependency)
	}
	return Middleware{kind: kindMetrics, wrap: (&metricsMW{m: m}).wrap}, nil
}

// metricsMW is a Metrics middleware; Chain knows it by its Middleware's kind.
type metricsMW struct{ m *metrics.Metrics }

func (w *metricsMW) wrap(next consumer.Handler) consumer.Handler {
	return &metricsHandler{m: w.m, durations: newDurationSeries(w.m.HandleDuration), next: next}
}

// metricsHandler is the handler a metricsMW wraps around next.
type metricsHandler struct {
	m         *metrics.Metrics
	durations *durationSeries
	next      consumer.Handler
}

func (h *metricsHandler) Handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	start := time.Now()
	o, err := h.next.Handle(ctx, d)
	h.durations.observer(d.Group, d.Topic).Observe(time.Since(start).Seconds())
	if err != nil {
		h.m.Errors.WithLabelValues(d.Group, d.Topic, retry.Classify(err).String()).Inc()
		if errors.Is(err, ErrPanic) {
			h.m.Panics.WithLabelValues(d.Group, d.Topic).Inc()
		}
		if errors.Is(err, ErrUnidentifiable) {
			h.m.Unidentifiable.WithLabelValues(d.Group, d.Topic).Inc()
		}
	}
	return o, err
}
