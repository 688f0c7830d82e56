package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// Label names used by every rmqguard series.
const (
	labelGroup   = "group"
	labelTopic   = "topic"
	labelOutcome = "outcome"
	labelClass   = "class"
	labelCause   = "cause"
	labelReason  = "reason"
)

// attemptBuckets are the upper bounds of rmqguard_attempts: deliveries 1 to 17, the most a message gets
// with the client's default MaxReconsumeTimes of 16.
var attemptBuckets = []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}

// Metrics is the set of rmqguard collectors, fed by the consumer's final decisions (consumer.WithObserver),
// the middleware chain (middleware.Metrics) and the dedup store (dedup.WithObserver); the package doc says
// which source counts what, and how the duplicate rate is computed.
type Metrics struct {
	// Messages counts messages at their final decision (consumer.Decision), once per answered delivery:
	// rmqguard_messages_total{group,topic,outcome}, outcome one of processed, duplicate, stale, retry,
	// dead_lettered (published to %DLQ%<group> with its reason), dead_letter (moved to %DLQ%<group> by the
	// broker: delay level -1, or a retry on the last delivery), unavailable (answered a retry after
	// OutageWait), unsubscribed, unset. A processed member of a retried batch counts as processed (it comes
	// back and then counts as a duplicate, cause redelivery) and in rmqguard_batch_retried_total.
	Messages *prometheus.CounterVec
	// Duplicates counts messages whose event the dedup scope had already processed, by cause:
	// rmqguard_duplicates_total{group,topic,cause}, cause one of redelivery (the same message again),
	// resend (a new message with the same event ID), replay (a DLQ replay), read from the dedup row, and
	// unknown when it could not be read; see consumer.Outcome's Cause.
	Duplicates *prometheus.CounterVec
	// DeadLetters counts messages that went to %DLQ%<group> (final outcome dead_lettered or dead_letter) by
	// reason class: rmqguard_dead_letters_total{group,topic,reason}, reason one of permanent,
	// unidentifiable, version_gap, exhausted, panic, timeout, lease_held, other (see consumer.Outcome's Cause).
	DeadLetters *prometheus.CounterVec
	// Stale counts messages acknowledged as stale at their final decision: their aggregate version was not
	// above the stored one (middleware.Version, or a handler's consumer.Stale), so they wrote nothing:
	// rmqguard_stale_total{group,topic}. The same messages count in rmqguard_messages_total{outcome="stale"}.
	Stale *prometheus.CounterVec
	// Attempts observes, for each processed message, the deliveries it took (ReconsumeTimes + 1):
	// rmqguard_attempts{group,topic}, buckets attemptBuckets.
	Attempts *prometheus.HistogramVec
	// BatchRetried counts messages whose own outcome acknowledged them but whose batch was retried (they
	// come back as duplicates): rmqguard_batch_retried_total{group,topic}. Always 0 with BatchSize 1.
	BatchRetried *prometheus.CounterVec
	// HandlersInFlight is the number of handler calls running now: rmqguard_handlers_in_flight{group}.
	HandlersInFlight *prometheus.GaugeVec
	// ConsumerLag is how many messages the consumer's queues are behind (max offset minus consumer offset,
	// summed over the queues this process holds; from the client's GetOffsetDiffMap, polled every
	// consumer.Config.LagInterval): rmqguard_consumer_lag{group,topic}; topic may be %RETRY%<group>.
	ConsumerLag *prometheus.GaugeVec
	// HandleDuration observes the chain's time per message run in seconds (recorded by middleware.Metrics):
	// rmqguard_handle_duration_seconds{group,topic}. middleware.Metrics keeps the child series it observes,
	// one per (group, topic): do not delete them (DeleteLabelValues, Reset) while a chain runs.
	HandleDuration *prometheus.HistogramVec
	// Panics counts recovered handler panics: rmqguard_panics_total{group,topic}.
	Panics *prometheus.CounterVec
	// Unidentifiable counts messages dead-lettered because no business event ID could be extracted:
	// rmqguard_unidentifiable_total{group,topic}.
	Unidentifiable *prometheus.CounterVec
	// Errors counts handler errors by retry class (transient, permanent, infrastructure, unknown):
	// rmqguard_handler_errors_total{group,topic,class}.
	Errors *prometheus.CounterVec
	// ConsumptionPaused is 1 while the consumer group's consumption is paused because the store is unavailable (the
	// consumer's store health gate), else 0: rmqguard_consumption_paused{group}.
	ConsumptionPaused *prometheus.GaugeVec
	// ConsumptionPausedSeconds adds up the length of every ended pause, in seconds:
	// rmqguard_consumption_paused_seconds_total{group}.
	ConsumptionPausedSeconds *prometheus.CounterVec
	// UnsubscribedMessages counts messages acknowledged without handling because the group no longer subscribes
	// their tag (retried messages arrive through %RETRY%<group>, subscribed with "*"):
	// rmqguard_unsubscribed_total{group,topic}.
	UnsubscribedMessages *prometheus.CounterVec
	// DLQLettersWaiting is the number of letters on %DLQ%<group>, over every master broker, that wait for an
	// operator: no replay has sent them and their event has not been processed since:
	// rmqguard_dlq_letters_waiting{group}. Set by a DLQ census (dlq.Monitor),
	// not by the consumer; absent while no census has succeeded, and while the last census failed or
	// missed a master that held waiting letters.
	DLQLettersWaiting *prometheus.GaugeVec
	// AfterCommitFailures counts after-commit hooks (dedup.AfterCommit) that returned an error or panicked
	// after their transaction committed: effects lost, the messages stay processed:
	// rmqguard_after_commit_failures_total{group}. Reported by the dedup store (dedup.WithObserver(m)).
	AfterCommitFailures *prometheus.CounterVec
	// LeaseTakeovers counts messages processed by a delivery that took over the expired lease of an earlier
	// one that never finished (middleware.Lease; the earlier one may have made the external call):
	// rmqguard_lease_takeovers_total{group}. A delivery retried because a live lease was held is a retry
	// with cause lease_held in the consumer's log line, not counted here.
	LeaseTakeovers *prometheus.CounterVec
}

// New creates the collectors and registers them on reg. It returns an error, wrapped, when reg is nil or
// a collector of the same name is already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("metrics: New: Registerer is nil")
	}
	gt := []string{labelGroup, labelTopic}
	m := &Metrics{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_messages_total", Help: "Messages handled, by outcome.",
		}, []string{labelGroup, labelTopic, labelOutcome}),
		Duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_duplicates_total", Help: "Messages whose business event was already processed by the consumer group, by cause.",
		}, []string{labelGroup, labelTopic, labelCause}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_dead_letters_total", Help: "Messages that went to the group's DLQ, by reason class.",
		}, []string{labelGroup, labelTopic, labelReason}),
		Stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_stale_total", Help: "Messages acknowledged as stale: their aggregate version was not above the stored one; nothing written.",
		}, gt),
		Attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rmqguard_attempts", Help: "Deliveries a processed message took (ReconsumeTimes + 1).",
			Buckets: attemptBuckets,
		}, gt),
		BatchRetried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_batch_retried_total", Help: "Messages acknowledged by their own outcome but sent back with their retried batch.",
		}, gt),
		HandlersInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rmqguard_handlers_in_flight", Help: "Handler calls running now.",
		}, []string{labelGroup}),
		ConsumerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rmqguard_consumer_lag", Help: "Messages the consumer's queues are behind (from the client's GetOffsetDiffMap).",
		}, gt),
		HandleDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rmqguard_handle_duration_seconds", Help: "Time spent in the middleware chain per message.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, gt),
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_panics_total", Help: "Handler panics recovered (the message is retried).",
		}, gt),
		Unidentifiable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_unidentifiable_total", Help: "Messages dead-lettered because no business event ID was found.",
		}, gt),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_handler_errors_total", Help: "Handler errors by retry class.",
		}, []string{labelGroup, labelTopic, labelClass}),
		ConsumptionPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rmqguard_consumption_paused", Help: "1 while consumption is paused because the store is unavailable.",
		}, []string{labelGroup}),
		ConsumptionPausedSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_consumption_paused_seconds_total", Help: "Seconds consumption was paused because the store was unavailable (ended pauses).",
		}, []string{labelGroup}),
		UnsubscribedMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_unsubscribed_total", Help: "Retried messages acknowledged without handling because their tag is no longer subscribed.",
		}, gt),
		DLQLettersWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rmqguard_dlq_letters_waiting", Help: "Letters on the group's DLQ (every master broker) that no replay has sent and whose event is not processed.",
		}, []string{labelGroup}),
		AfterCommitFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_after_commit_failures_total", Help: "After-commit hooks that failed (error or panic) after their transaction committed: effects lost.",
		}, []string{labelGroup}),
		LeaseTakeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_lease_takeovers_total", Help: "Messages processed after taking over the expired lease of a delivery that never finished.",
		}, []string{labelGroup}),
	}
	for _, c := range []prometheus.Collector{m.Messages, m.Duplicates, m.DeadLetters, m.Stale, m.Attempts, m.BatchRetried,
		m.HandlersInFlight, m.ConsumerLag, m.HandleDuration, m.Panics, m.Unidentifiable, m.Errors,
		m.ConsumptionPaused, m.ConsumptionPausedSeconds, m.UnsubscribedMessages, m.DLQLettersWaiting, m.AfterCommitFailures,
		m.LeaseTakeovers} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// Paused implements consumer.Observer: rmqguard_consumption_paused{group} becomes 1.
func (m *Metrics) Paused(group, _ string) { m.ConsumptionPaused.WithLabelValues(group).Set(1) }

// Unpaused implements consumer.Observer: rmqguard_consumption_paused{group} becomes 0 and the pause's
// length d is added to rmqguard_consumption_paused_seconds_total{group}.
func (m *Metrics) Unpaused(group string, d time.Duration) {
	m.ConsumptionPaused.WithLabelValues(group).Set(0)
	m.ConsumptionPausedSeconds.WithLabelValues(group).Add(d.Seconds())
}

// Decided implements consumer.Observer: the final decision about one message. It counts
// rmqguard_messages_total by final outcome; for a duplicate rmqguard_duplicates_total by cause; for a dead
// letter (dead_lettered or dead_letter) rmqguard_dead_letters_total by reason class; for a stale message
// rmqguard_stale_total; for an unsubscribed one rmqguard_unsubscribed_total; for a processed message
// its deliveries in rmqguard_attempts (and rmqguard_lease_takeovers_total when it took over a lease); and rmqguard_batch_retried_total when its batch was retried.
func (m *Metrics) Decided(d *consumer.Delivery, dec consumer.Decision) {
	o := dec.Outcome
	m.Messages.WithLabelValues(d.Group, d.Topic, o.Kind.String()).Inc()
	switch o.Kind {
	case consumer.KindDuplicate:
		m.Duplicates.WithLabelValues(d.Group, d.Topic, o.Cause).Inc()
	case consumer.KindDeadLetter, consumer.KindDeadLettered:
		m.DeadLetters.WithLabelValues(d.Group, d.Topic, o.Cause).Inc()
	case consumer.KindStale:
		m.Stale.WithLabelValues(d.Group, d.Topic).Inc()
	case consumer.KindUnsubscribed:
		m.UnsubscribedMessages.WithLabelValues(d.Group, d.Topic).Inc()
	case consumer.KindProcessed:
		m.Attempts.WithLabelValues(d.Group, d.Topic).Observe(float64(d.Attempt + 1))
		if o.Cause == causelabel.Takeover {
			m.LeaseTakeovers.WithLabelValues(d.Group).Inc()
		}
	}
	if dec.BatchRetried {
		m.BatchRetried.WithLabelValues(d.Group, d.Topic).Inc()
	}
}

// AfterCommitFailed implements dedup.Observer: rmqguard_after_commit_failures_total{group} goes up by one.
func (m *Metrics) AfterCommitFailed(group string) { m.AfterCommitFailures.WithLabelValues(group).Inc() }

// InFlight implements consumer.Observer: rmqguard_handlers_in_flight{group} changes by delta.
func (m *Metrics) InFlight(group string, delta int) {
	m.HandlersInFlight.WithLabelValues(group).Add(float64(delta))
}

// Lag implements consumer.Observer: rmqguard_consumer_lag{group,topic} is set to messages.
func (m *Metrics) Lag(group, topic string, messages int64) {
	m.ConsumerLag.WithLabelValues(group, topic).Set(float64(messages))
}

// Subscribed, which the consumer calls once at Start (see consumer.Observer): for group and each topic it creates, at zero, the
// series of rmqguard_messages_total for every outcome, rmqguard_duplicates_total for every cause,
// rmqguard_dead_letters_total for every reason class, rmqguard_stale_total, rmqguard_batch_retried_total and
// rmqguard_unsubscribed_total, and for group rmqguard_after_commit_failures_total and
// rmqguard_lease_takeovers_total, so that the first increment of each is seen by rate() and increase() (a series
// that first appears at 1 loses it), and a group without duplicates has a duplicate ratio of 0, not none.
func (m *Metrics) Subscribed(group string, topics []string) {
	m.AfterCommitFailures.WithLabelValues(group)
	m.LeaseTakeovers.WithLabelValues(group)
	for _, topic := range topics {
		for k := consumer.Kind(0); k <= consumer.KindUnsubscribed; k++ { // from the zero value, unset
			m.Messages.WithLabelValues(group, topic, k.String())
		}
		for _, c := range []string{causelabel.Redelivery, causelabel.Resend, causelabel.Replay, causelabel.Unknown} {
			m.Duplicates.WithLabelValues(group, topic, string(c))
		}
		for _, c := range []string{causelabel.Permanent, causelabel.Unidentifiable, causelabel.VersionGap,
			causelabel.Exhausted, causelabel.Panic, causelabel.Timeout, causelabel.LeaseHeld, causelabel.Other} {
			m.DeadLetters.WithLabelValues(group, topic, string(c))
		}
		m.Stale.WithLabelValues(group, topic)
		m.BatchRetried.WithLabelValues(group, topic)
		m.UnsubscribedMessages.WithLabelValues(group, topic)
	}
}
