package dashboards_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/tools/dashboards"
)

var (
	dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "rmqguard.json")
	rulesFile     = filepath.Join("..", "..", "deploy", "prometheus", "rules.yml")
)

// known is what an expression may name: every series metrics.New and metrics.NewOutbox expose, every
// recording rule of rules.yml.
func known(t *testing.T) map[string]bool {
	t.Helper()
	names, err := dashboards.Exposed(func(reg prometheus.Registerer) error {
		if _, err := metrics.New(reg); err != nil {
			return err
		}
		_, err := metrics.NewOutbox(reg)
		return err
	})
	require.NoError(t, err)
	require.True(t, names["rmqguard_messages_total"], "metrics.New exposes rmqguard_messages_total: %v", names)
	file, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	recorded, _, err := dashboards.Rules(file)
	require.NoError(t, err)
	for _, r := range recorded {
		names[r] = true
	}
	return names
}

func TestDashboard_EveryExpressionNamesAnExposedMetricOrARecordingRule(t *testing.T) {
	file, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	exprs, err := dashboards.DashboardExprs(file)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(exprs), 15, "the dashboard's panels and variables")

	assert.Empty(t, dashboards.Unknown(exprs, known(t)))

	// The panels the dashboard must have, by the series they show.
	all := make([]string, 0, len(exprs))
	for _, e := range exprs {
		all = append(all, e.Query)
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"rmqguard:duplicate_ratio_by_cause:rate5m", "rmqguard_messages_total",
		"rmqguard_handle_duration_seconds_bucket", "rmqguard:dead_letters:rate5m", "rmqguard:consumer_lag:sum",
		"rmqguard_consumption_paused", "rmqguard:duplicate_ratio:increase1d", "rmqguard:batch_retried:rate5m",
		"rmqguard:after_commit_failures:increase5m", "rmqguard:lease_takeovers:increase1h",
		"rmqguard:outbox_pending_rows:max", "rmqguard:outbox_oldest_pending_age_seconds:max", "rmqguard:outbox_sent:rate5m",
		"rmqguard:outbox_parked_rows:max", "rmqguard:effects:rate5m", "rmqguard:effects_retried:rate5m"} {
		assert.Contains(t, joined, want)
	}
	assert.Empty(t, counterValues(t, panelsOnly(exprs)), "F41: no panel shows a counter's value, which a restart resets")
}

func TestRules_EveryExpressionNamesAnExposedMetricOrARecordingRule(t *testing.T) {
	file, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	recorded, exprs, err := dashboards.Rules(file)
	require.NoError(t, err)
	for _, want := range []string{"rmqguard:duplicate_ratio:rate5m", "rmqguard:duplicate_ratio:increase1d",
		"rmqguard:messages_acknowledged:rate5m", "rmqguard:batch_retried:rate5m", "rmqguard:batch_retried_ratio:rate5m",
		"rmqguard:after_commit_failures:increase5m", "rmqguard:lease_takeovers:increase1h",
		"rmqguard:outbox_pending_rows:max", "rmqguard:outbox_oldest_pending_age_seconds:max", "rmqguard:outbox_parked_rows:max",
		"rmqguard:outbox_sent:rate5m", "rmqguard:outbox_send_failures:rate5m", "rmqguard:outbox_parked:increase1h",
		"rmqguard:effects:rate5m", "rmqguard:effects_retried:rate5m"} {
		assert.Contains(t, recorded, want)
	}
	for _, raw := range []string{"rmqguard_outbox_pending_rows", "rmqguard_outbox_oldest_pending_age_seconds",
		"rmqguard_outbox_parked_rows", "rmqguard_outbox_sent_total", "rmqguard_outbox_send_failures_total",
		"rmqguard_outbox_parked_total", "rmqguard_effects_total"} {
		assert.True(t, known(t)[raw], "metrics.NewOutbox exposes %s", raw)
	}
	require.GreaterOrEqual(t, len(exprs), 13)

	assert.Empty(t, dashboards.Unknown(exprs, known(t)))
	assert.Empty(t, counterValues(t, exprs), "F41: no rule reads a counter's value, which a restart resets")
}

// F41: every ratio's denominator in the rules and the dashboard is the same set of outcomes, the messages
// acknowledged; each of them is an outcome rmqguard_messages_total has (consumer.Kind).
func TestRulesAndDashboard_F41_OneSetOfAcknowledgedOutcomes(t *testing.T) {
	const acknowledged = "processed|duplicate|stale|dead_lettered|dead_letter"
	rules, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	_, exprs, err := dashboards.Rules(rules)
	require.NoError(t, err)
	board, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	panels, err := dashboards.DashboardExprs(board)
	require.NoError(t, err)
	n := 0
	for _, e := range append(exprs, panels...) {
		res, err := dashboards.LabelRegexps(e.Query, "outcome")
		require.NoError(t, err)
		for _, re := range res {
			assert.Equal(t, acknowledged, re, e.Where)
			n++
		}
	}
	assert.GreaterOrEqual(t, n, 10, "the ratio rules and the dashboard's range ratio")
	outcomes := map[string]bool{}
	for k := consumer.Kind(0); k <= consumer.KindUnsubscribed; k++ {
		outcomes[k.String()] = true
	}
	for _, o := range strings.Split(acknowledged, "|") {
		assert.True(t, outcomes[o], "%s is an outcome", o)
	}
}

func TestCounterValues_CountersOutsideARange(t *testing.T) {
	got, err := dashboards.CounterValues(`sum(rmqguard_duplicates_total) / sum(increase(rmqguard_messages_total[$__range]))
	  + sum(rmqguard_consumer_lag) + rmqguard:duplicate_ratio:rate5m + rate(h_bucket[5m]) + h_count`)
	require.NoError(t, err)
	assert.Equal(t, []string{"h_count", "rmqguard_duplicates_total"}, got, "gauges and recording rules are not counters")
	_, err = dashboards.CounterValues(`sum(`)
	assert.Error(t, err)

	res, err := dashboards.LabelRegexps(`a{outcome=~"x|y", group=~"$group"} / b{outcome="z"}`, "outcome")
	require.NoError(t, err)
	assert.Equal(t, []string{"x|y"}, res)
}

// counterValues lists, for each expression that reads a counter's value, where and which.
func counterValues(t *testing.T, exprs []dashboards.Expr) []string {
	t.Helper()
	var out []string
	for _, e := range exprs {
		names, err := dashboards.CounterValues(e.Query)
		require.NoError(t, err)
		for _, n := range names {
			out = append(out, e.Where+": "+n)
		}
	}
	return out
}

// panelsOnly drops the template variables (label_values(rmqguard_messages_total, group) reads labels only).
func panelsOnly(exprs []dashboards.Expr) []dashboards.Expr {
	var out []dashboards.Expr
	for _, e := range exprs {
		if !strings.HasPrefix(e.Where, "variable ") {
			out = append(out, e)
		}
	}
	return out
}

func TestUnknown_ReportsAMisspelledMetricAndAnUnparsableExpression(t *testing.T) {
	bad := []byte(`{"panels": [
	  {"title": "typo", "targets": [{"refId": "A", "expr": "sum(rate(rmqguard_message_total[$__rate_interval]))"}]},
	  {"title": "fine", "targets": [{"refId": "A", "expr": "rmqguard:duplicate_ratio:rate5m{group=~\"$group\"}"}]},
	  {"type": "row", "title": "row", "panels": [
	    {"title": "broken", "targets": [{"refId": "B", "expr": "sum(rate(rmqguard_messages_total[5m]"}]}]}]}`)
	exprs, err := dashboards.DashboardExprs(bad)
	require.NoError(t, err)
	require.Len(t, exprs, 3)

	problems := dashboards.Unknown(exprs, known(t))
	require.Len(t, problems, 2, "%v", problems)
	assert.Contains(t, problems[0], `panel "typo" target A: unknown series rmqguard_message_total`)
	assert.Contains(t, problems[1], `panel "broken" target B: parse`)
}

func TestMetricNames_SelectorsOnly(t *testing.T) {
	names, err := dashboards.MetricNames(`sum by (group, cause) (rate(a_total{group=~"$group"}[$__rate_interval]))
	  / on (group) group_left () sum by (group) (rate({__name__="b_total"}[${__range}]))
	  and histogram_quantile(0.9, sum by (le) (rate(c_bucket[5m]))) > bool 0.5 unless on() vector(1)`)
	require.NoError(t, err)
	assert.Equal(t, []string{"a_total", "b_total", "c_bucket"}, names, "functions, labels and keywords are not names")

	_, err = dashboards.MetricNames(`{__name__=~"rmqguard_.*"}`)
	assert.Error(t, err, "a selector without an exact name cannot be checked")
}

func TestDashboardExprs_TemplateVariables(t *testing.T) {
	exprs, err := dashboards.DashboardExprs([]byte(`{"templating": {"list": [
	  {"name": "datasource", "type": "datasource", "query": "prometheus"},
	  {"name": "group", "type": "query", "query": {"query": "label_values(rmqguard_messages_total, group)"}},
	  {"name": "topic", "type": "query", "query": "label_values(rmqguard_messages_total{group=~\"$group\"}, topic)"}]}}`))
	require.NoError(t, err)
	require.Len(t, exprs, 2, "the datasource variable has no PromQL")
	assert.Equal(t, dashboards.Expr{Where: "variable $group", Query: "rmqguard_messages_total"}, exprs[0])
	assert.Equal(t, `rmqguard_messages_total{group=~"$group"}`, exprs[1].Query)

	_, err = dashboards.DashboardExprs([]byte(`{"templating": {"list": [{"name": "x", "type": "query", "query": "metrics(rmq)"}]}}`))
	assert.Error(t, err, "a variable query that cannot be checked is refused")
}

func TestExposed_VectorsBeforeTheirFirstUse(t *testing.T) {
	names, err := dashboards.Exposed(func(reg prometheus.Registerer) error {
		reg.MustRegister(
			prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"a", "b", "c"}),
			prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "h"}, []string{"a"}),
			prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"}, []string{"a"}),
			prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "s", Help: "h"}, []string{"a"}),
			prometheus.NewHistogram(prometheus.HistogramOpts{Name: "plain_h", Help: "h"}),
			prometheus.NewGauge(prometheus.GaugeOpts{Name: "plain_g", Help: "h", ConstLabels: prometheus.Labels{"k": "v"}}),
		)
		return nil
	})
	require.NoError(t, err)
	got := make([]string, 0, len(names))
	for n := range names {
		got = append(got, n)
	}
	sort.Strings(got)
	assert.Equal(t, []string{"c_total", "g", "h_seconds_bucket", "h_seconds_count", "h_seconds_sum",
		"plain_g", "plain_h_bucket", "plain_h_count", "plain_h_sum", "s", "s_count", "s_sum"}, got)

	_, err = dashboards.Exposed(func(reg prometheus.Registerer) error {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "dup_total", Help: "h"})
		if err := reg.Register(c); err != nil {
			return err
		}
		return reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "dup_total", Help: "h"}))
	})
	assert.Error(t, err, "a conflict in register is returned")
}

// F42: the dashboard shows the depth of each group's DLQ (letters waiting for a replay), and the rule the
// alert and the panel read is recorded from the gauge metrics.New exposes.
func TestDashboard_ShowsTheDLQLettersWaiting(t *testing.T) {
	file, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	exprs, err := dashboards.DashboardExprs(file)
	require.NoError(t, err)
	var panels []string
	for _, e := range exprs {
		if strings.Contains(e.Query, "rmqguard:dlq_letters_waiting:max") {
			panels = append(panels, e.Query)
		}
	}
	assert.NotEmpty(t, panels, "a panel shows rmqguard:dlq_letters_waiting:max")
	assert.True(t, known(t)["rmqguard_dlq_letters_waiting"], "metrics.New exposes the gauge")
	assert.True(t, known(t)["rmqguard:dlq_letters_waiting:max"], "rules.yml records the group's max")
}

// Several changes append panels: every panel (rows and the panels inside them) has its own id, and no two
// panels overlap on Grafana's 24-column grid.
func TestDashboard_PanelIDsAndGridPositionsDoNotCollide(t *testing.T) {
	file, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	type grid struct{ X, Y, W, H int }
	type panel struct {
		ID      int     `json:"id"`
		Title   string  `json:"title"`
		GridPos grid    `json:"gridPos"`
		Panels  []panel `json:"panels"`
	}
	var board struct{ Panels []panel }
	require.NoError(t, json.Unmarshal(file, &board))
	var all []panel
	var flatten func([]panel)
	flatten = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			flatten(p.Panels)
		}
	}
	flatten(board.Panels)
	require.GreaterOrEqual(t, len(all), 20)

	ids := map[int]string{}
	for _, p := range all {
		assert.NotZero(t, p.ID, "panel %q has an id", p.Title)
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		assert.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v", p.Title, g)
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("panels %q %+v and %q %+v overlap", a.Title, ga, b.Title, gb)
			}
		}
	}
}
