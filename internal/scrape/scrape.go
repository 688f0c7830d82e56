// Package scrape reads counters from a Prometheus text endpoint, for the demo's report and the tests that
// watch a consumer running as a process of its own.
package scrape

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Counter returns the value of the counter name whose labels include every pair of match, from the
// Prometheus text exposition at url; 0 when no such series exists yet. When several series match, the
// first one listed is returned (use Sum to add them up). Errors (the endpoint unreachable or answering
// other than 200, an unparsable body) are wrapped with the URL.
func Counter(ctx context.Context, url, name string, match map[string]string) (float64, error) {
	fam, err := family(ctx, url, name)
	if err != nil || fam == nil {
		return 0, err
	}
	for _, m := range fam.GetMetric() {
		if matches(m, match) {
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}

// Sum returns the sum of the counter name over every series whose labels include every pair of match
// (e.g. all topics and causes of rmqguard_duplicates_total{group="g"}), from the Prometheus text exposition
// at url; 0 when none exists yet. Errors as for Counter.
func Sum(ctx context.Context, url, name string, match map[string]string) (float64, error) {
	fam, err := family(ctx, url, name)
	if err != nil || fam == nil {
		return 0, err
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if matches(m, match) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}

// family fetches url and returns the metric family name, nil when the exposition does not list it.
func family(ctx context.Context, url, name string) (*dto.MetricFamily, error) {
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
	return families[name], nil
}

func matches(m *dto.Metric, match map[string]string) bool {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}
