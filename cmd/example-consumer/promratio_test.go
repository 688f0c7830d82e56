package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// make demo's last check before its verdict, against a real Prometheus with deploy/prometheus/rules.yml:
// duplicates / messages acknowledged over the consumer's life, increase() in Prometheus, agrees with the
// same from /metrics (summed over topics, causes and the outcomes that end a delivery — retries are not in
// it), and is read at a scrape taken after /metrics was read: a count that changed since the previous check
// is seen, never the older value. As in the demo, the workload starts once Prometheus has scraped the
// consumer's series at zero. F41.
func TestDemoRatio_F41_PrometheusAgreesWithMetricsOverMessagesAcknowledged(t *testing.T) {
	w := newRatioWorld(t)
	const group = "demo-ratio"
	p := w.process(time.Now().Add(-time.Second))
	p.atZero(group, "processed", "duplicate", "retry")
	p.messages.WithLabelValues(group, "PAY", "dead_lettered")
	p.dups.WithLabelValues(group, "ORDER", "redelivery")
	waitForFirstScrape(context.Background(), w.promURL, w.metricsURL, group, 30*time.Second) // the demo, before its workload
	p.messages.WithLabelValues(group, "ORDER", "processed").Add(1800)
	p.messages.WithLabelValues(group, "ORDER", "duplicate").Add(200)
	p.messages.WithLabelValues(group, "ORDER", "retry").Add(20)
	p.messages.WithLabelValues(group, "PAY", "dead_lettered").Add(1)
	p.dups.WithLabelValues(group, "ORDER", "resend").Add(197)
	p.dups.WithLabelValues(group, "ORDER", "redelivery").Add(3)
	p.messages.WithLabelValues("other-group", "ORDER", "duplicate").Add(500)
	p.dups.WithLabelValues("other-group", "ORDER", "resend").Add(500)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := checkPrometheusRatio(ctx, w.promURL, w.metricsURL, group, 30*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "duplicates / acknowledged of group demo-ratio over the consumer's")
	assert.Contains(t, c.line, "= 0.099950; /metrics: 200 duplicates / 2001 acknowledged = 0.099950: agree", "not / 2021: retries are not acknowledged")

	p.messages.WithLabelValues(group, "ORDER", "processed").Add(100)
	c = checkPrometheusRatio(ctx, w.promURL, w.metricsURL, group, 30*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "= 0.095193; /metrics: 200 duplicates / 2101 acknowledged = 0.095193: agree", "from a scrape after the change")
}

// F41: a consumer restarts — its counters start at 0 again. In Prometheus, duplicates / messages acknowledged
// over a window holding both processes counts both (the increase() of rmqguard:duplicate_ratio:increase1d and
// of the demo's query), where a ratio of counter values would show the second process alone; the demo's
// check, over the second process's life, agrees with its /metrics.
func TestDemoRatio_F41_WindowedRatioSurvivesARestart(t *testing.T) {
	w := newRatioWorld(t)
	const group = "restarted"
	first := w.process(time.Now().Add(-time.Second))
	first.atZero(group, "processed", "duplicate", "retry")
	since := first.scraped(t, group)
	first.messages.WithLabelValues(group, "ORDER", "processed").Add(90)
	first.messages.WithLabelValues(group, "ORDER", "duplicate").Add(10)
	first.messages.WithLabelValues(group, "ORDER", "retry").Add(30)
	first.dups.WithLabelValues(group, "ORDER", "resend").Add(10)
	first.scraped(t, group)

	second := w.process(time.Now())
	second.atZero(group, "processed", "duplicate")
	second.scraped(t, group)
	second.messages.WithLabelValues(group, "ORDER", "processed").Add(150)
	second.messages.WithLabelValues(group, "ORDER", "duplicate").Add(50)
	second.dups.WithLabelValues(group, "ORDER", "resend").Add(50)
	at := second.scraped(t, group)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := promapi.NewClient(promapi.Config{Address: w.promURL})
	require.NoError(t, err)
	api := promv1.NewAPI(client)
	got, ok, err := scalarAt(ctx, api, ratioQuery(group, at.Sub(since)+2*time.Second), at)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 0.2, got, "(10 + 50) / (100 + 200), not 50 / 200")
	require.Eventually(t, func() bool {
		got, ok, err = scalarAt(ctx, api, `rmqguard:duplicate_ratio:increase1d{group="restarted"}`, time.Now())
		return err == nil && ok && math.Abs(got-0.2) < 1e-9
	}, 20*time.Second, 250*time.Millisecond, "the recording rule over both processes: %v %v %v", got, ok, err)

	c := checkPrometheusRatio(ctx, w.promURL, w.metricsURL, group, 30*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "50 duplicates / 200 acknowledged = 0.250000: agree", "the demo's check: the running process's life")
}

func TestDemoRatio_UnreachablePrometheusIsAProblem(t *testing.T) {
	w := newRatioWorld(t)
	p := w.process(time.Now())
	p.messages.WithLabelValues("g", "ORDER", "processed").Add(10)

	c := checkPrometheusRatio(context.Background(), "http://127.0.0.1:1", w.metricsURL, "g", 2*time.Second)
	assert.Contains(t, c.problem, "Prometheus http://127.0.0.1:1", "fails the demo's verdict")

	c = checkPrometheusRatio(context.Background(), "", w.metricsURL, "g", time.Second)
	assert.Empty(t, c.problem, "--prometheus-url empty: not queried")
	assert.Contains(t, c.line, "not queried")
}

// A run without a single duplicate is a ratio of 0, not "Prometheus has no value": a consumer that does not
// create its series at zero (metrics.Subscribed) has no rmqguard_duplicates_total{group=G}, and the ratio's
// numerator falls back to 0 ("or … * 0").
func TestDemoRatio_NoDuplicatesIsRatioZero(t *testing.T) {
	w := newRatioWorld(t)
	p := w.process(time.Now().Add(-time.Second))
	p.messages.WithLabelValues("clean", "ORDER", "processed")
	p.scraped(t, "clean")
	p.messages.WithLabelValues("clean", "ORDER", "processed").Add(50)
	p.dups.WithLabelValues("other", "ORDER", "resend").Add(1) // the family exists, not for this group
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := checkPrometheusRatio(ctx, w.promURL, w.metricsURL, "clean", 15*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "0 duplicates / 50 acknowledged = 0.000000: agree")
}

// ratioWorld is a /metrics of the test's own, scraped every second by a Prometheus the test starts with
// deploy/prometheus/rules.yml; process swaps what it serves, as a consumer restart does.
type ratioWorld struct {
	t          *testing.T
	current    atomic.Pointer[http.Handler]
	metricsURL string
	promURL    string
}

func newRatioWorld(t *testing.T) *ratioWorld {
	w := &ratioWorld{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if h := w.current.Load(); h != nil {
			(*h).ServeHTTP(rw, r)
			return
		}
		http.NotFound(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.metricsURL = srv.URL + "/metrics"
	w.promURL = testenv.Prometheus(t, strings.TrimPrefix(srv.URL, "http://"))
	return w
}

// ratioProcess is one consumer process: its counters (labels as metrics.New has them) and start time.
type ratioProcess struct {
	w              *ratioWorld
	messages, dups *prometheus.CounterVec
}

// process starts serving a new process's registry, with process_start_time_seconds = started.
func (w *ratioWorld) process(started time.Time) *ratioProcess {
	reg := prometheus.NewRegistry()
	p := &ratioProcess{w: w,
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_messages_total", Help: "h"},
			[]string{"group", "topic", "outcome"}),
		dups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_duplicates_total", Help: "h"},
			[]string{"group", "topic", "cause"})}
	start := prometheus.NewGauge(prometheus.GaugeOpts{Name: "process_start_time_seconds", Help: "h"})
	start.Set(float64(started.UnixMilli()) / 1000)
	reg.MustRegister(p.messages, p.dups, start)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	w.current.Store(&h)
	return p
}

// atZero creates group's series of rmqguard_messages_total for outcomes and of rmqguard_duplicates_total for
// cause resend at zero (as metrics.Subscribed does), on topic ORDER: increase() counts a series from its
// first sample, so one that appears already above 0 loses what it counted before.
func (p *ratioProcess) atZero(group string, outcomes ...string) {
	for _, o := range outcomes {
		p.messages.WithLabelValues(group, "ORDER", o)
	}
	p.dups.WithLabelValues(group, "ORDER", "resend")
}

// scraped waits until Prometheus holds a scrape of group's rmqguard_messages_total taken from now on, and
// returns its time.
func (p *ratioProcess) scraped(t *testing.T, group string) time.Time {
	t.Helper()
	client, err := promapi.NewClient(promapi.Config{Address: p.w.promURL})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at, err := scrapeAfter(ctx, promv1.NewAPI(client), group, time.Now(), 30*time.Second)
	require.NoError(t, err)
	return at
}
