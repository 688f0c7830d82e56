package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/metrics"
)

var _ consumer.Observer = (*metrics.Metrics)(nil)

func TestObserver_F19_PauseGaugeAndSeconds_F26_Unsubscribed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)

	m.Paused("cg", "connection refused")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConsumptionPaused.WithLabelValues("cg")))
	m.Unpaused("cg", 1500*time.Millisecond)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.ConsumptionPaused.WithLabelValues("cg")))
	assert.Equal(t, 1.5, testutil.ToFloat64(m.ConsumptionPausedSeconds.WithLabelValues("cg")))
	m.Decided(delivery(0), decision(consumer.KindUnsubscribed, ""))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.UnsubscribedMessages.WithLabelValues("cg", "ORDER")))

	n, err := testutil.GatherAndCount(reg, "rmqguard_consumption_paused", "rmqguard_consumption_paused_seconds_total", "rmqguard_unsubscribed_total")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the names the chaos scripts read")
}
