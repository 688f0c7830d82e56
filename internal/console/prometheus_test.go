package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F41: with a Prometheus server, the groups page shows the group's rmqguard:duplicate_ratio:rate5m (the
// recording rule of deploy/prometheus): a consumer acknowledging 4 messages per scrape, 1 of them a
// duplicate, is at 25 %.
func TestConsole_GroupsPageShowsTheDuplicateRatioFromPrometheus(t *testing.T) {
	w := newWorld(t, func(c *console.Config) {
		group := c.Groups[0]
		reg := prometheus.NewRegistry()
		messages := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_messages_total"}, []string{"group", "outcome"})
		duplicates := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rmqguard_duplicates_total"}, []string{"group", "cause"})
		reg.MustRegister(messages, duplicates)
		metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			messages.WithLabelValues(group, "processed").Add(3)
			messages.WithLabelValues(group, "duplicate").Add(1)
			duplicates.WithLabelValues(group, "redelivery").Add(1)
			metrics.ServeHTTP(w, r)
		}))
		t.Cleanup(target.Close)
		c.PrometheusURL = testenv.Prometheus(t, strings.TrimPrefix(target.URL, "http://"))
	})
	cl := w.login()
	var cell string
	require.Eventually(t, func() bool {
		cell = field(t, w.get(cl, "/").row(t, "group-"+w.group), "duplicate-ratio")
		return strings.HasSuffix(cell, "% (5 min)")
	}, 60*time.Second, time.Second, "the rule evaluated (last: %q)", cell)
	assert.Equal(t, "25.00 % (5 min)", cell)
}
