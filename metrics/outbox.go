package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outbox holds the outbox relay's series; it implements outbox.Observer (give it as Config.Observer).
// The gauges are the table's, as the relay that last looked saw them: several relays on one table report
// the same rows.
type Outbox struct {
	// Sent is rmqguard_outbox_sent_total{topic}: messages the broker answered SEND_OK.
	Sent *prometheus.CounterVec
	// SendFailures is rmqguard_outbox_send_failures_total{topic}: sends that failed and will be retried.
	SendFailures *prometheus.CounterVec
	// Parked is rmqguard_outbox_parked_total{kind}: rows parked (message or effect).
	Parked *prometheus.CounterVec
	// Effects is rmqguard_effects_total{effect,result}: runs of a durable effect, result ok or failed (a
	// run that parks its effect is failed, and counted in Parked too).
	Effects *prometheus.CounterVec
	// Pending is rmqguard_outbox_pending_rows: rows not yet sent nor parked.
	Pending prometheus.Gauge
	// ParkedRows is rmqguard_outbox_parked_rows: rows parked now.
	ParkedRows prometheus.Gauge
	// OldestAge is rmqguard_outbox_oldest_pending_age_seconds: since the oldest pending row's commit; 0 when none.
	OldestAge prometheus.Gauge
}

// NewOutbox creates the series and registers them on reg; an error, wrapped, when reg is nil or a name is
// already registered there.
func NewOutbox(reg prometheus.Registerer) (*Outbox, error) {
	if reg == nil {
		return nil, fmt.Errorf("metrics: NewOutbox: Registerer is nil")
	}
	m := &Outbox{
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_outbox_sent_total",
			Help: "Outbox messages the broker answered SEND_OK, by topic."}, []string{labelTopic}),
		SendFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_outbox_send_failures_total",
			Help: "Outbox sends that failed and wait for another attempt, by topic."}, []string{labelTopic}),
		Parked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_outbox_parked_total",
			Help: "Outbox rows parked (never sent or run again until retried), by kind."}, []string{"kind"}),
		Effects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_effects_total",
			Help: "Runs of durable effects, by effect and result (ok, failed)."}, []string{"effect", "result"}),
		Pending:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "rmqguard_outbox_pending_rows", Help: "Outbox rows pending."}),
		ParkedRows: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rmqguard_outbox_parked_rows", Help: "Outbox rows parked."}),
		OldestAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rmqguard_outbox_oldest_pending_age_seconds",
			Help: "Seconds since the oldest pending outbox row was committed; 0 when none is pending."}),
	}
	for _, c := range []prometheus.Collector{m.Sent, m.SendFailures, m.Parked, m.Effects, m.Pending, m.ParkedRows, m.OldestAge} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// MessageSent counts a SEND_OK (ok) or a failed send to topic.
func (m *Outbox) MessageSent(topic string, ok bool) {
	if ok {
		m.Sent.WithLabelValues(topic).Inc()
		return
	}
	m.SendFailures.WithLabelValues(topic).Inc()
}

// EffectRan counts one run of effect.
func (m *Outbox) EffectRan(effect string, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.Effects.WithLabelValues(effect, result).Inc()
}

// RowParked counts a parked row of kind.
func (m *Outbox) RowParked(kind string) { m.Parked.WithLabelValues(kind).Inc() }

// Backlog sets the gauges.
func (m *Outbox) Backlog(pending, parked int, oldest time.Duration) {
	m.Pending.Set(float64(pending))
	m.ParkedRows.Set(float64(parked))
	m.OldestAge.Set(oldest.Seconds())
}
