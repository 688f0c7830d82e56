// Package metrics holds rmqguard's Prometheus collectors. They are registered on a Registerer the
// application passes in (never the global default registry implicitly), so tests and several consumers
// in one process do not collide.
package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label names used by every rmqguard series.
const (
	LabelGroup   = "group"
	LabelTopic   = "topic"
	LabelOutcome = "outcome"
	LabelClass   = "class"
)

// Metrics is the set of rmqguard collectors. The duplicate rate of a group is
// rate(rmqguard_duplicates_total[5m]) / rate(rmqguard_messages_total[5m]).
type Metrics struct {
	// Messages counts handled messages: rmqguard_messages_total{group,topic,outcome}, outcome one of
	// processed, duplicate, stale, retry, dead_letter, unset.
	Messages *prometheus.CounterVec
	// Duplicates counts messages recognised as already processed: rmqguard_duplicates_total{group,topic}.
	Duplicates *prometheus.CounterVec
	// HandleDuration observes the chain's time per message in seconds:
	// rmqguard_handle_duration_seconds{group,topic}.
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
}

// New creates the collectors and registers them on reg. It returns an error, wrapped, when reg is nil or
// a collector of the same name is already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("metrics: New: Registerer is nil")
	}
	gt := []string{LabelGroup, LabelTopic}
	m := &Metrics{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_messages_total", Help: "Messages handled, by outcome.",
		}, []string{LabelGroup, LabelTopic, LabelOutcome}),
		Duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_duplicates_total", Help: "Messages whose business event was already processed by the consumer group.",
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
		}, []string{LabelGroup, LabelTopic, LabelClass}),
		ConsumptionPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rmqguard_consumption_paused", Help: "1 while consumption is paused because the store is unavailable.",
		}, []string{LabelGroup}),
		ConsumptionPausedSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_consumption_paused_seconds_total", Help: "Seconds consumption was paused because the store was unavailable (ended pauses).",
		}, []string{LabelGroup}),
		UnsubscribedMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rmqguard_unsubscribed_total", Help: "Retried messages acknowledged without handling because their tag is no longer subscribed.",
		}, gt),
	}
	for _, c := range []prometheus.Collector{m.Messages, m.Duplicates, m.HandleDuration, m.Panics, m.Unidentifiable, m.Errors,
		m.ConsumptionPaused, m.ConsumptionPausedSeconds, m.UnsubscribedMessages} {
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

// Unsubscribed implements consumer.Observer: rmqguard_unsubscribed_total{group,topic} goes up by one.
func (m *Metrics) Unsubscribed(group, topic string) {
	m.UnsubscribedMessages.WithLabelValues(group, topic).Inc()
}
