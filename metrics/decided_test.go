package metrics_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
)

// delivery is a message of group cg on ORDER at ReconsumeTimes attempt.
func delivery(attempt int32) *consumer.Delivery {
	msg := &primitive.MessageExt{Message: primitive.Message{Topic: "ORDER"}, MsgId: "m", ReconsumeTimes: attempt}
	return testenv.NewDelivery("cg", msg)
}

func decision(k consumer.Kind, c string) consumer.Decision {
	return consumer.Decision{Outcome: consumer.Outcome{Kind: k, Cause: c}}
}

// Each final decision counts once in rmqguard_messages_total by its final outcome, and in the series of
// its kind: duplicates by cause, dead letters by reason class, attempts of processed messages, batch retries.
func TestDecided_S1_F10_CountsFinalOutcomesCausesReasonsAndAttempts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)

	m.Decided(delivery(0), decision(consumer.KindProcessed, ""))
	m.Decided(delivery(2), decision(consumer.KindProcessed, ""))
	batch := decision(consumer.KindProcessed, "")
	batch.BatchRetried = true
	m.Decided(delivery(0), batch)
	m.Decided(delivery(1), decision(consumer.KindDuplicate, causelabel.Redelivery))
	m.Decided(delivery(0), decision(consumer.KindDuplicate, causelabel.Resend))
	m.Decided(delivery(0), decision(consumer.KindDuplicate, causelabel.Resend))
	m.Decided(delivery(0), decision(consumer.KindDuplicate, causelabel.Replay))
	m.Decided(delivery(0), decision(consumer.KindDeadLettered, causelabel.Permanent))
	m.Decided(delivery(3), decision(consumer.KindDeadLetter, causelabel.Exhausted))
	m.Decided(delivery(0), decision(consumer.KindRetry, ""))

	msgs := func(outcome string) float64 {
		return testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", outcome))
	}
	assert.Equal(t, 3.0, msgs("processed"))
	assert.Equal(t, 4.0, msgs("duplicate"))
	assert.Equal(t, 1.0, msgs("dead_lettered"))
	assert.Equal(t, 1.0, msgs("dead_letter"))
	assert.Equal(t, 1.0, msgs("retry"))
	dups := func(cause string) float64 {
		return testutil.ToFloat64(m.Duplicates.WithLabelValues("cg", "ORDER", cause))
	}
	assert.Equal(t, 1.0, dups("redelivery"))
	assert.Equal(t, 2.0, dups("resend"))
	assert.Equal(t, 1.0, dups("replay"))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues("cg", "ORDER", "permanent")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues("cg", "ORDER", "exhausted")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.BatchRetried.WithLabelValues("cg", "ORDER")))

	want := `
# HELP rmqguard_attempts Deliveries a processed message took (ReconsumeTimes + 1).
# TYPE rmqguard_attempts histogram
rmqguard_attempts_bucket{group="cg",topic="ORDER",le="1"} 2
rmqguard_attempts_bucket{group="cg",topic="ORDER",le="2"} 2
rmqguard_attempts_bucket{group="cg",topic="ORDER",le="3"} 3
`
	for le := 4; le <= 17; le++ {
		want += `rmqguard_attempts_bucket{group="cg",topic="ORDER",le="` + strconv.Itoa(le) + `"} 3` + "\n"
	}
	want += `rmqguard_attempts_bucket{group="cg",topic="ORDER",le="+Inf"} 3
rmqguard_attempts_sum{group="cg",topic="ORDER"} 5
rmqguard_attempts_count{group="cg",topic="ORDER"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "rmqguard_attempts"),
		"two processed at the first delivery, one at the third; duplicates and dead letters are not observed")
}

func TestInFlightAndLag_Gauges(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)

	m.InFlight("cg", 1)
	m.InFlight("cg", 1)
	m.InFlight("cg", -1)
	m.Lag("cg", "ORDER", 120)
	m.Lag("cg", "ORDER", 80)

	assert.Equal(t, 1.0, testutil.ToFloat64(m.HandlersInFlight.WithLabelValues("cg")))
	assert.Equal(t, 80.0, testutil.ToFloat64(m.ConsumerLag.WithLabelValues("cg", "ORDER")), "the last poll")
}

// The names other tools (Prometheus rules, the Grafana dashboard, the demo, chaos) read.
func TestNew_RegistersTheAgreedNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	d := delivery(0)
	m.Decided(d, decision(consumer.KindDuplicate, causelabel.Resend))
	m.Decided(d, decision(consumer.KindDeadLettered, causelabel.Panic))
	m.Decided(d, decision(consumer.KindProcessed, ""))
	batch := decision(consumer.KindProcessed, "")
	batch.BatchRetried = true
	m.Decided(d, batch)
	m.Decided(d, decision(consumer.KindProcessed, causelabel.Takeover))
	m.InFlight("cg", 0)
	m.Lag("cg", "ORDER", 0)
	m.Paused("cg", "x")
	m.Unpaused("cg", 0)
	m.Decided(d, decision(consumer.KindUnsubscribed, ""))
	m.HandleDuration.WithLabelValues("cg", "ORDER").Observe(0.01)
	m.Panics.WithLabelValues("cg", "ORDER").Inc()
	m.Unidentifiable.WithLabelValues("cg", "ORDER").Inc()
	m.Errors.WithLabelValues("cg", "ORDER", "unknown").Inc()

	families, err := reg.Gather()
	require.NoError(t, err)
	labels := map[string][]string{}
	for _, f := range families {
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[f.GetName()] = append(labels[f.GetName()], l.GetName())
		}
	}
	assert.Equal(t, map[string][]string{
		"rmqguard_messages_total":                   {"group", "outcome", "topic"},
		"rmqguard_duplicates_total":                 {"cause", "group", "topic"},
		"rmqguard_dead_letters_total":               {"group", "reason", "topic"},
		"rmqguard_attempts":                         {"group", "topic"},
		"rmqguard_batch_retried_total":              {"group", "topic"},
		"rmqguard_handlers_in_flight":               {"group"},
		"rmqguard_consumer_lag":                     {"group", "topic"},
		"rmqguard_consumption_paused":               {"group"},
		"rmqguard_consumption_paused_seconds_total": {"group"},
		"rmqguard_unsubscribed_total":               {"group", "topic"},
		"rmqguard_handle_duration_seconds":          {"group", "topic"},
		"rmqguard_panics_total":                     {"group", "topic"},
		"rmqguard_unidentifiable_total":             {"group", "topic"},
		"rmqguard_handler_errors_total":             {"class", "group", "topic"},
		"rmqguard_lease_takeovers_total":            {"group"},
	}, labels)
}

// F35: a message processed by a delivery that took over an expired lease counts in
// rmqguard_lease_takeovers_total{group}, once, and as processed; a retry for a held lease counts as a retry
// only, and a dead letter on its last delivery under reason lease_held.
func TestDecided_F35_CountsLeaseTakeovers(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	m.Decided(delivery(0), decision(consumer.KindProcessed, ""))
	m.Decided(delivery(1), decision(consumer.KindRetry, causelabel.LeaseHeld))
	m.Decided(delivery(2), decision(consumer.KindProcessed, causelabel.Takeover))
	m.Decided(delivery(16), decision(consumer.KindDeadLetter, causelabel.LeaseHeld))

	assert.Equal(t, 1.0, testutil.ToFloat64(m.LeaseTakeovers.WithLabelValues("cg")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", "processed")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", "retry")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues("cg", "ORDER", "lease_held")))
}

// S7: a stale final decision counts in rmqguard_stale_total and rmqguard_messages_total{outcome="stale"};
// other decisions do not; a version-gap dead letter counts under its own reason class.
func TestDecided_S7_CountsStaleDecisions(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)

	m.Decided(delivery(0), decision(consumer.KindStale, ""))
	m.Decided(delivery(1), decision(consumer.KindStale, ""))
	m.Decided(delivery(0), decision(consumer.KindRetry, ""))
	m.Decided(delivery(0), decision(consumer.KindDeadLettered, causelabel.VersionGap))

	assert.Equal(t, 2.0, testutil.ToFloat64(m.Stale.WithLabelValues("cg", "ORDER")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", "stale")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues("cg", "ORDER", "version_gap")))
}
