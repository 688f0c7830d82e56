package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// make demo's last check before its verdict, against a real Prometheus with deploy/prometheus/rules.yml:
// the ratio of rmqguard:duplicate_ratio:total agrees with duplicates / handled on /metrics (summed over
// topics, causes and outcomes), and is read from a scrape taken after /metrics was read — a count that
// changed since the previous check is seen, never the older value.
func TestIssue6_DemoRatio_PrometheusRuleAgreesWithMetrics(t *testing.T) {
	messages, dups, metricsURL, promURL := ratioWorld(t)
	const group = "demo-ratio"
	messages.WithLabelValues(group, "ORDER", "processed").Add(1800)
	messages.WithLabelValues(group, "ORDER", "duplicate").Add(200)
	messages.WithLabelValues(group, "ORDER", "retry").Add(20)
	messages.WithLabelValues(group, "PAY", "dead_lettered").Add(1)
	dups.WithLabelValues(group, "ORDER", "resend").Add(197)
	dups.WithLabelValues(group, "ORDER", "redelivery").Add(3)
	messages.WithLabelValues("other-group", "ORDER", "duplicate").Add(500)
	dups.WithLabelValues("other-group", "ORDER", "resend").Add(500)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := checkPrometheusRatio(ctx, promURL, metricsURL, group, 30*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, `rmqguard:duplicate_ratio:total{group="demo-ratio"} = 0.098961`, "200 / 2021")
	assert.Contains(t, c.line, "200 duplicates / 2021 handled = 0.098961: agree")

	messages.WithLabelValues(group, "ORDER", "processed").Add(100)
	c = checkPrometheusRatio(ctx, promURL, metricsURL, group, 30*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "= 0.094295 (", "200 / 2121, from a scrape after the change")
	assert.Contains(t, c.line, "200 duplicates / 2121 handled = 0.094295: agree")
}

func TestIssue6_DemoRatio_UnreachablePrometheusIsAProblem(t *testing.T) {
	reg := prometheus.NewRegistry()
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_messages_total", Help: "h"},
		[]string{"group", "topic", "outcome"})
	reg.MustRegister(messages)
	messages.WithLabelValues("g", "ORDER", "processed").Add(10)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	c := checkPrometheusRatio(context.Background(), "http://127.0.0.1:1", srv.URL, "g", 2*time.Second)
	assert.Contains(t, c.problem, "Prometheus http://127.0.0.1:1", "fails the demo's verdict")

	c = checkPrometheusRatio(context.Background(), "", srv.URL, "g", time.Second)
	assert.Empty(t, c.problem, "--prometheus-url empty: not queried")
	assert.Contains(t, c.line, "not queried")
}

// A run without a single duplicate is a ratio of 0, not "Prometheus has no evaluation": client_golang
// exposes a labelled counter only after its first use, so rmqguard_duplicates_total{group=G} does not exist,
// the rule's division has no left-hand side and rmqguard:duplicate_ratio:total{group=G} has no sample; the
// check then waits --prometheus-wait and fails the demo with "is the consumer scraped?".
func TestIssue6_DemoRatio_NoDuplicatesIsRatioZero(t *testing.T) {
	messages, dups, metricsURL, promURL := ratioWorld(t)
	messages.WithLabelValues("clean", "ORDER", "processed").Add(50)
	dups.WithLabelValues("other", "ORDER", "resend").Add(1) // the family exists, not for this group
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := checkPrometheusRatio(ctx, promURL, metricsURL, "clean", 15*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "0 duplicates / 50 handled = 0.000000: agree")
}

// ratioWorld serves rmqguard_messages_total and rmqguard_duplicates_total (labels as metrics.New has them)
// on a /metrics of its own, scraped by a Prometheus the test starts with deploy/prometheus/rules.yml.
func ratioWorld(t *testing.T) (messages, dups *prometheus.CounterVec, metricsURL, promURL string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	messages = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_messages_total", Help: "h"},
		[]string{"group", "topic", "outcome"})
	dups = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_duplicates_total", Help: "h"},
		[]string{"group", "topic", "cause"})
	reg.MustRegister(messages, dups)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return messages, dups, srv.URL + "/metrics", testenv.Prometheus(t, strings.TrimPrefix(srv.URL, "http://"))
}
