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

// A run without a single duplicate is a ratio of 0, not "Prometheus has no evaluation": client_golang
// exposes a labelled counter only after its first use, so rmqguard_duplicates_total{group=G} does not exist,
// the rule's division has no left-hand side and rmqguard:duplicate_ratio:total{group=G} has no sample; the
// check then waits --prometheus-wait and fails the demo with "is the consumer scraped?".
func TestIssue6_DemoRatio_NoDuplicatesIsRatioZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_messages_total", Help: "h"},
		[]string{"group", "topic", "outcome"})
	dups := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_duplicates_total", Help: "h"},
		[]string{"group", "topic", "cause"})
	reg.MustRegister(messages, dups)
	messages.WithLabelValues("clean", "ORDER", "processed").Add(50)
	dups.WithLabelValues("other", "ORDER", "resend").Add(1) // the family exists, not for this group
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	promURL := testenv.Prometheus(t, strings.TrimPrefix(srv.URL, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := checkPrometheusRatio(ctx, promURL, srv.URL+"/metrics", "clean", 15*time.Second)
	assert.Empty(t, c.problem)
	assert.Contains(t, c.line, "0 duplicates / 50 handled = 0.000000: agree")
}
