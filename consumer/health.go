package consumer

import (
	"context"
	"time"
)

// healthProbe checks the store the handlers depend on (WithHealthProbe's p).
type healthProbe interface {
	Probe(ctx context.Context) error
}

// Observer is told about the consumer's decisions and state changes, for metrics; *metrics.Metrics
// implements it. Its methods are called synchronously on the consumer's goroutines and must return quickly.
// One that also has Subscribed(group string, topics []string) is told once, before Start starts the
// client, the group and its business topics (without the namespace), e.g. to create its series at zero.
type Observer interface {
	// Decided reports the final decision about one message, once per answered delivery, after its
	// callback's outcomes were combined and its dead letters published: what the broker was told (see
	// Decision), KindUnsubscribed for one acknowledged without handling because its tag is not in the
	// group's subscription for d.Topic (the original topic). A delivery the consumer does not answer (it is
	// shutting down: the message comes back after a restart as it was) is not reported.
	Decided(d *Delivery, dec Decision)
	// InFlight: delta (+1 or -1) handler calls of group started or returned; the sum is the number of
	// handlers running now.
	InFlight(group string, delta int)
	// Lag: the consumer's queues of topic (a business topic or %RETRY%<group>) are behind by messages
	// (the broker's max offset minus the consumer's offset, summed over the queues this process holds),
	// polled every Config.LagInterval from the client's GetOffsetDiffMap; 0 for a topic whose queues this
	// process no longer holds.
	Lag(group, topic string, messages int64)
	// Paused: consumption of group stopped pulling because the store is unavailable (reason says why).
	Paused(group, reason string)
	// Unpaused: the pause of group ended after d, because consumption resumed or because the consumer
	// stopped while paused.
	Unpaused(group string, d time.Duration)
}

// WithHealthProbe gives the store health gate a probe (e.g. a *dedup.Store), called with backoff (100 ms
// to 5 s) while the store is unavailable: Probe returns nil only when the store answers and accepts writes,
// and honours ctx. Default: the dedup store of the handler's chain; nil turns the probe off. See the
// package doc, "Health gate".
func WithHealthProbe(p interface {
	Probe(ctx context.Context) error
}) Option {
	return func(o *options) { o.probe, o.probeGiven = p, true }
}

// WithObserver reports final decisions, handlers in flight, consumer lag (polled every Config.LagInterval
// while the consumer runs), pauses and unsubscribed messages to obs (e.g. *metrics.Metrics). Default:
// none (nil too), and no lag polling.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.observer, o.observed = obs, true
		}
	}
}

// nopObserver is the Observer used without WithObserver.
type nopObserver struct{}

func (nopObserver) Paused(string, string)          {}
func (nopObserver) Unpaused(string, time.Duration) {}
func (nopObserver) Decided(*Delivery, Decision)    {}
func (nopObserver) InFlight(string, int)           {}
func (nopObserver) Lag(string, string, int64)      {}

// subscriptionObserver is an Observer that also wants to know, once at Start, the consumer group and the
// topics it consumes, e.g. to create its counters at zero: a counter series that first appears already at 1
// loses that increment in Prometheus's rate() and increase(). *metrics.Metrics is one. Start calls
// Subscribed before it starts the client, so before the first message is decided.
type subscriptionObserver interface {
	// Subscribed: group consumes topics (the business topics, without the namespace).
	Subscribed(group string, topics []string)
}

// announceSubscriptions tells an observer that implements subscriptionObserver what c consumes.
func (c *Consumer) announceSubscriptions() {
	so, ok := c.observer.(subscriptionObserver)
	if !ok {
		return
	}
	topics := make([]string, len(c.cfg.Subscriptions))
	for i, s := range c.cfg.Subscriptions {
		topics[i] = s.Topic
	}
	so.Subscribed(c.cfg.Group, topics)
}
