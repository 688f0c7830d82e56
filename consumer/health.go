package consumer

import (
	"context"
	"time"
)

// HealthProbe checks the store the handlers depend on. Probe returns nil only when the store answers and
// accepts writes (a read-only server is not healthy); it must honour ctx. *dedup.Store implements it.
type HealthProbe interface {
	Probe(ctx context.Context) error
}

// Observer is told about the consumer's own state changes, for metrics; *metrics.Metrics implements it.
// Its methods are called synchronously on the consumer's goroutines and must return quickly.
type Observer interface {
	// Paused: consumption of group stopped pulling because the store is unavailable (reason says why).
	Paused(group, reason string)
	// Unpaused: the pause of group ended after d, because consumption resumed or because the consumer
	// stopped while paused.
	Unpaused(group string, d time.Duration)
	// Unsubscribed: a message of group on topic (the original topic) was acknowledged without handling
	// because its tag is not in the group's subscription for that topic (KindUnsubscribed).
	Unsubscribed(group, topic string)
}

// WithHealthProbe gives the store health gate a probe. When a handler reports the store unavailable
// (KindUnavailable), pulling is suspended and p is probed with backoff (100 ms doubling to 5 s, each call
// bounded by 5 s) until it returns nil; then pulling resumes and the waiting messages are handled again.
// Without a probe the gate reopens after the same backoff and the handlers themselves are the probe: if the
// store is still down the gate closes again with the next, longer backoff (each reopening and closing is
// logged). Pass the dedup store: it checks that the server answers and accepts writes.
func WithHealthProbe(p HealthProbe) Option { return func(o *options) { o.probe = p } }

// WithObserver reports pauses and unsubscribed messages to obs (e.g. *metrics.Metrics). Default: none.
func WithObserver(obs Observer) Option { return func(o *options) { o.observer = obs } }

// nopObserver is the Observer used without WithObserver.
type nopObserver struct{}

func (nopObserver) Paused(string, string)          {}
func (nopObserver) Unpaused(string, time.Duration) {}
func (nopObserver) Unsubscribed(string, string)    {}
