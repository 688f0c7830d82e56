// Package scrape reads counters from a Prometheus text endpoint, for the demo's report, the console's
// duplicate ratio without Prometheus, and the tests that watch a consumer running as a process of its own.
package scrape

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Counter returns the sum of the counters name whose labels include every pair of match (e.g. every cause
// of rmqguard_duplicates_total for a group and topic), from the Prometheus text exposition at url; 0 when
// no such series exists yet. Errors (the endpoint unreachable or
// answering other than 200, an unparsable body) are wrapped with the URL.
func Counter(ctx context.Context, url, name string, match map[string]string) (float64, error) {
	families, err := read(ctx, url)
	if err != nil {
		return 0, err
	}
	fam, ok := families[name]
	if !ok {
		return 0, nil
	}
	total := 0.0
	for _, m := range fam.GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if matches(labels, match) {
			total += m.GetCounter().GetValue()
		}
	}
	return total, nil
}

// Gauge returns the value of the gauge name that has a single series (e.g. process_start_time_seconds),
// from the Prometheus text exposition at url. Errors as Counter's, and when there is no such gauge or more
// than one series of it.
func Gauge(ctx context.Context, url, name string) (float64, error) {
	families, err := read(ctx, url)
	if err != nil {
		return 0, err
	}
	fam, ok := families[name]
	if !ok || fam.GetType() != dto.MetricType_GAUGE || len(fam.GetMetric()) != 1 {
		return 0, fmt.Errorf("metrics %s: no single gauge %s", url, name)
	}
	return fam.GetMetric()[0].GetGauge().GetValue(), nil
}

// read fetches and parses the exposition at url.
func read(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: parse: %w", url, err)
	}
	return families, nil
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// AckOutcomes are the outcome labels of rmqguard_messages_total that end a message's delivery: the
// denominator of the duplicate ratio (duplicates / acknowledged).
var AckOutcomes = []string{"processed", "duplicate", "stale", "dead_lettered", "dead_letter"}

// Duplicates returns group's rmqguard_duplicates_total and its acknowledged messages (rmqguard_messages_total
// of AckOutcomes), each summed over its series, from the endpoint at url (since its process started).
func Duplicates(ctx context.Context, url, group string) (dups, acked float64, err error) {
	if dups, err = Counter(ctx, url, "rmqguard_duplicates_total", map[string]string{"group": group}); err != nil {
		return 0, 0, err
	}
	for _, o := range AckOutcomes {
		n, err := Counter(ctx, url, "rmqguard_messages_total", map[string]string{"group": group, "outcome": o})
		if err != nil {
			return 0, 0, err
		}
		acked += n
	}
	return dups, acked, nil
}
