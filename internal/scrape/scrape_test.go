package scrape_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/scrape"
)

// exposition serves a registry holding rmqguard_duplicates_total for two groups, two topics and two causes.
func exposition(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	dups := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_duplicates_total", Help: "h"},
		[]string{"group", "topic", "cause"})
	reg.MustRegister(dups)
	dups.WithLabelValues("g", "ORDER", "resend").Add(200)
	dups.WithLabelValues("g", "ORDER", "redelivery").Add(3)
	dups.WithLabelValues("g", "PAY", "replay").Add(1)
	dups.WithLabelValues("other", "ORDER", "resend").Add(50)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCounter_AddsEveryMatchingSeries(t *testing.T) {
	url := exposition(t)
	ctx := context.Background()

	got, err := scrape.Counter(ctx, url, "rmqguard_duplicates_total", map[string]string{"group": "g"})
	require.NoError(t, err)
	assert.Equal(t, 204.0, got, "all topics and causes of group g, not group other")

	got, err = scrape.Counter(ctx, url, "rmqguard_duplicates_total", map[string]string{"group": "g", "topic": "ORDER"})
	require.NoError(t, err)
	assert.Equal(t, 203.0, got)

	got, err = scrape.Counter(ctx, url, "rmqguard_messages_total", map[string]string{"group": "g"})
	require.NoError(t, err)
	assert.Equal(t, 0.0, got, "a family not exposed yet counts 0")

	got, err = scrape.Counter(ctx, url, "rmqguard_duplicates_total", map[string]string{"group": "g", "cause": "replay"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, got)
}

func TestCounter_EndpointErrorsAreReturned(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, err := scrape.Counter(context.Background(), srv.URL, "rmqguard_duplicates_total", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), srv.URL, "the error names the endpoint")
}

func TestGauge_ReadsASingleSeriesGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	started := prometheus.NewGauge(prometheus.GaugeOpts{Name: "process_start_time_seconds", Help: "h"})
	dups := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_duplicates_total", Help: "h"}, []string{"group"})
	reg.MustRegister(started, dups)
	started.Set(1700000000.25)
	dups.WithLabelValues("g").Inc()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	got, err := scrape.Gauge(context.Background(), srv.URL, "process_start_time_seconds")
	require.NoError(t, err)
	assert.Equal(t, 1700000000.25, got)
	_, err = scrape.Gauge(context.Background(), srv.URL, "rmqguard_duplicates_total")
	assert.Error(t, err, "a counter is not a gauge")
	_, err = scrape.Gauge(context.Background(), srv.URL, "absent")
	assert.Error(t, err)
}
