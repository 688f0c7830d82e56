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

// ratioRule is the recording rule of deploy/prometheus/rules.yml that the demo reads: a group's duplicates /
// handled messages since its consumers started, sum by (group) over topics (and causes, and outcomes).
const ratioRule = "rmqguard:duplicate_ratio:total"

// ratioTolerance is how far Prometheus's ratio may be from the one computed from /metrics: half a unit of the
// sixth decimal printed. Both divide the same integer sums, so in practice they are equal.
const ratioTolerance = 5e-7

// ratioCheck is the outcome of comparing Prometheus's duplicate ratio with /metrics: line is printed before
// the verdict; problem, when not empty, fails the demo.
type ratioCheck struct {
	line    string
	problem string
}

// checkPrometheusRatio reads duplicates and handled messages of group from the consumer's /metrics, waits
// (up to wait) until Prometheus at promURL has evaluated ratioRule on a scrape taken after that read, and
// compares the two ratios. A count that moved while it waited (a stray redelivery) starts it over, at most
// three times. An unreachable or silent Prometheus is a problem, not an error: the demo still gives its verdict.
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
	dups, handled, err := metricsCounts(ctx, metricsURL, group)
	if err != nil {
		return ratioCheck{problem: err.Error()}, false
	}
	if handled == 0 {
		return ratioCheck{problem: fmt.Sprintf("/metrics: no rmqguard_messages_total for group %s", group)}, false
	}
	got, err := ruleAfter(ctx, api, group, mark, wait)
	if err != nil {
		return ratioCheck{problem: fmt.Sprintf("Prometheus %s: %v", promURL, err)}, false
	}
	want := dups / handled
	selector := fmt.Sprintf("%s{group=%q}", ratioRule, group)
	line := fmt.Sprintf("Prometheus %s: %s = %.6f (evaluated %s on a scrape of %s); /metrics: %.0f duplicates / %.0f handled = %.6f",
		promURL, selector, got.value, got.evaluated.Format("15:04:05.000"), got.scraped.Format("15:04:05.000"), dups, handled, want)
	if math.Abs(got.value-want) <= ratioTolerance {
		return ratioCheck{line: line + ": agree"}, false
	}
	dupsNow, handledNow, err := metricsCounts(ctx, metricsURL, group)
	if err == nil && (dupsNow != dups || handledNow != handled) {
		return ratioCheck{line: line, problem: "duplicate ratio: /metrics moved while Prometheus was read"}, true
	}
	return ratioCheck{line: line + ": DISAGREE", problem: fmt.Sprintf("duplicate ratio: Prometheus %.6f, /metrics %.6f", got.value, want)}, false
}

// metricsCounts sums rmqguard_duplicates_total and rmqguard_messages_total of group over all their series.
func metricsCounts(ctx context.Context, url, group string) (dups, handled float64, err error) {
	match := map[string]string{"group": group}
	if dups, err = scrape.Counter(ctx, url, "rmqguard_duplicates_total", match); err != nil {
		return 0, 0, err
	}
	if handled, err = scrape.Counter(ctx, url, "rmqguard_messages_total", match); err != nil {
		return 0, 0, err
	}
	return dups, handled, nil
}

// ruleValue is one evaluation of ratioRule and the time of the scrape it used.
type ruleValue struct {
	value     float64
	evaluated time.Time
	scraped   time.Time
}

// ruleAfter polls Prometheus every 500 ms until ratioRule for group was evaluated on a scrape taken after
// mark, and returns that evaluation. It gives up after wait, or when ctx ends.
func ruleAfter(ctx context.Context, api promv1.API, group string, mark time.Time, wait time.Duration) (ruleValue, error) {
	deadline := time.Now().Add(wait)
	rule := fmt.Sprintf("%s{group=%q}", ratioRule, group)
	for {
		v, ok, err := latestEvaluation(ctx, api, group, rule)
		if err != nil {
			return ruleValue{}, err
		}
		if ok && v.scraped.After(mark) {
			return v, nil
		}
		if time.Now().After(deadline) {
			return ruleValue{}, fmt.Errorf("no evaluation of %s on a scrape after %s within %s (is the consumer scraped? see /targets)",
				rule, mark.Format("15:04:05.000"), wait)
		}
		select {
		case <-ctx.Done():
			return ruleValue{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// latestEvaluation returns the rule's newest evaluation, the time of the newest scrape of the group's
// rmqguard_messages_total at that moment (the one the rule read), and its value; ok is false while the
// rule has no value for the group.
func latestEvaluation(ctx context.Context, api promv1.API, group, rule string) (ruleValue, bool, error) {
	evaluated, ok, err := scalarAt(ctx, api, "timestamp("+rule+")", time.Now())
	if err != nil || !ok {
		return ruleValue{}, false, err
	}
	at := time.UnixMilli(int64(math.Round(evaluated * 1000)))
	scraped, ok, err := scalarAt(ctx, api, fmt.Sprintf("max(timestamp(rmqguard_messages_total{group=%q}))", group), at)
	if err != nil || !ok {
		return ruleValue{}, false, err
	}
	value, ok, err := scalarAt(ctx, api, rule, at)
	if err != nil || !ok {
		return ruleValue{}, false, err
	}
	return ruleValue{value: value, evaluated: at, scraped: time.UnixMilli(int64(math.Round(scraped * 1000)))}, true, nil
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
