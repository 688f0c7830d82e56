package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/rmqguard/rmqguard/internal/scrape"
)

// acknowledged selects the messages acknowledged, the duplicate ratio's denominator in
// deploy/prometheus/rules.yml: outcomes that end a message's delivery (retries do not).
const acknowledged = `outcome=~"processed|duplicate|stale|dead_lettered|dead_letter"`

// ratioTolerance is how far Prometheus's ratio may be from the one computed from /metrics: half a unit of the
// sixth decimal printed. Both divide the same integer sums, so in practice they are equal.
const ratioTolerance = 5e-7

// ratioCheck is the outcome of comparing Prometheus's duplicate ratio with /metrics: line is printed before
// the verdict; problem, when not empty, fails the demo.
type ratioCheck struct {
	line    string
	problem string
}

// ratioQuery is group's duplicate ratio over the window w that ends when the query is evaluated, as the
// rules compute it (rmqguard:duplicate_ratio:increase1d, over w instead of a day): duplicates / messages
// acknowledged, each the increase() of its counters over the window, which counts across restarts.
func ratioQuery(group string, w time.Duration) string {
	g, r := fmt.Sprintf("group=%q", group), fmt.Sprintf("[%dms]", w.Milliseconds())
	acked := fmt.Sprintf("sum(increase(rmqguard_messages_total{%s,%s}%s))", g, acknowledged, r)
	return fmt.Sprintf("(sum(increase(rmqguard_duplicates_total{%s}%s)) or %s * 0) / %s", g, r, acked, acked)
}

// checkPrometheusRatio reads duplicates and messages acknowledged of group from the consumer's /metrics,
// waits (up to wait) until Prometheus at promURL has scraped the consumer after that read, and compares the
// two ratios: Prometheus's over the consumer's life (ratioQuery from its process start to that scrape,
// evaluated at the scrape's time). A count that moved while it waited (a stray redelivery) starts it over,
// at most three times. An unreachable or silent Prometheus is a problem, not an error: the demo still gives
// its verdict.
func checkPrometheusRatio(ctx context.Context, promURL, metricsURL, group string, wait time.Duration) ratioCheck {
	if promURL == "" {
		return ratioCheck{line: "Prometheus: not queried (--prometheus-url is empty)"}
	}
	client, err := promapi.NewClient(promapi.Config{Address: promURL})
	if err != nil {
		return ratioCheck{problem: fmt.Sprintf("Prometheus %s: %v", promURL, err)}
	}
	api := promv1.NewAPI(client)
	var c ratioCheck
	for round := 0; round < 3; round++ {
		var moved bool
		c, moved = compareOnce(ctx, api, promURL, metricsURL, group, wait)
		if !moved {
			return c
		}
	}
	return c
}

// compareOnce is one round of checkPrometheusRatio; moved reports that /metrics changed during the round.
func compareOnce(ctx context.Context, api promv1.API, promURL, metricsURL, group string, wait time.Duration) (ratioCheck, bool) {
	mark := time.Now()
	dups, acked, started, err := metricsCounts(ctx, metricsURL, group)
	if err != nil {
		return ratioCheck{problem: err.Error()}, false
	}
	if acked == 0 {
		return ratioCheck{problem: fmt.Sprintf("/metrics: no message acknowledged in rmqguard_messages_total for group %s", group)}, false
	}
	scraped, err := scrapeAfter(ctx, api, group, mark, wait)
	if err != nil {
		return ratioCheck{problem: fmt.Sprintf("Prometheus %s: %v", promURL, err)}, false
	}
	window := scraped.Sub(started).Round(time.Millisecond) + time.Millisecond
	got, ok, err := scalarAt(ctx, api, ratioQuery(group, window), scraped)
	if err == nil && !ok {
		err = fmt.Errorf("no duplicate ratio for group %s over %s", group, window)
	}
	if err != nil {
		return ratioCheck{problem: fmt.Sprintf("Prometheus %s: %v", promURL, err)}, false
	}
	want := dups / acked
	line := fmt.Sprintf("Prometheus %s: duplicates / acknowledged of group %s over the consumer's %s (increase() to the scrape of %s) = %.6f; /metrics: %.0f duplicates / %.0f acknowledged = %.6f",
		promURL, group, window.Round(time.Second), scraped.Format("15:04:05.000"), got, dups, acked, want)
	if math.Abs(got-want) <= ratioTolerance {
		return ratioCheck{line: line + ": agree"}, false
	}
	dupsNow, ackedNow, _, err := metricsCounts(ctx, metricsURL, group)
	if err == nil && (dupsNow != dups || ackedNow != acked) {
		return ratioCheck{line: line, problem: "duplicate ratio: /metrics moved while Prometheus was read"}, true
	}
	return ratioCheck{line: line + ": DISAGREE", problem: fmt.Sprintf("duplicate ratio: Prometheus %.6f, /metrics %.6f", got, want)}, false
}

// waitForFirstScrape waits, up to wait, until Prometheus at promURL holds a scrape of group's
// rmqguard_messages_total taken since the consumer at metricsURL started, so that the counters' first samples
// in Prometheus are the zeros metrics.Subscribed created: increase() counts a series from its first sample,
// and messages counted before it would be missing from the ratio. Run it before the workload. It reports
// nothing: checkPrometheusRatio reports a Prometheus that does not answer or does not scrape the consumer.
func waitForFirstScrape(ctx context.Context, promURL, metricsURL, group string, wait time.Duration) {
	if promURL == "" {
		return
	}
	client, err := promapi.NewClient(promapi.Config{Address: promURL})
	if err != nil {
		return
	}
	if _, _, started, err := metricsCounts(ctx, metricsURL, group); err == nil {
		_, _ = scrapeAfter(ctx, promv1.NewAPI(client), group, started, wait)
	}
}

// metricsCounts sums rmqguard_duplicates_total and the messages acknowledged (scrape.Duplicates) of group
// over all their series, and reads when the consumer's process started
// (process_start_time_seconds).
func metricsCounts(ctx context.Context, url, group string) (dups, acked float64, started time.Time, err error) {
	if dups, acked, err = scrape.Duplicates(ctx, url, group); err != nil {
		return 0, 0, time.Time{}, err
	}
	start, err := scrape.Gauge(ctx, url, "process_start_time_seconds")
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	return dups, acked, time.UnixMilli(int64(start * 1000)), nil
}

// scrapeAfter polls Prometheus every 500 ms until it holds a scrape of group's rmqguard_messages_total
// taken after mark, and returns that scrape's time. It gives up after wait, or when ctx ends.
func scrapeAfter(ctx context.Context, api promv1.API, group string, mark time.Time, wait time.Duration) (time.Time, error) {
	deadline := time.Now().Add(wait)
	q := fmt.Sprintf("max(timestamp(rmqguard_messages_total{group=%q}))", group)
	for {
		ts, ok, err := scalarAt(ctx, api, q, time.Now())
		if err != nil {
			return time.Time{}, err
		}
		scraped := time.UnixMilli(int64(math.Round(ts * 1000)))
		if ok && scraped.After(mark) {
			return scraped, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no scrape of rmqguard_messages_total{group=%q} after %s within %s (is the consumer scraped? see /targets)",
				group, mark.Format("15:04:05.000"), wait)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// scalarAt runs the instant query q at ts and returns its single sample's value; ok is false when the result
// is empty. A result of more than one sample is an error (the queries select one group).
func scalarAt(ctx context.Context, api promv1.API, q string, ts time.Time) (float64, bool, error) {
	res, _, _, err := api.Query(ctx, q, ts)
	if err != nil {
		return 0, false, fmt.Errorf("query %s: %w", q, err)
	}
	vec, isVec := res.(model.Vector)
	if !isVec {
		return 0, false, fmt.Errorf("query %s: got a %s, want a vector", q, res.Type())
	}
	switch len(vec) {
	case 0:
		return 0, false, nil
	case 1:
		return float64(vec[0].Value), true, nil
	default:
		return 0, false, errors.New("query " + q + ": more than one series")
	}
}
