package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// duplicateRatioRule is deploy/prometheus/rules.yml's recording rule of the duplicate ratio per group:
// duplicates / messages acknowledged, over 5 minutes.
const duplicateRatioRule = "rmqguard:duplicate_ratio:rate5m"

// prometheusTimeout bounds the query.
const prometheusTimeout = 5 * time.Second

// duplicateRatios asks the Prometheus server at base for duplicateRatioRule and returns the ratio by group
// (NaN: no message acknowledged in the window). Errors: the server unreachable or answering an error.
func duplicateRatios(ctx context.Context, client *http.Client, base string) (map[string]float64, error) {
	u := strings.TrimSuffix(base, "/") + "/api/v1/query?query=" + url.QueryEscape(duplicateRatioRule)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("prometheus query: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus query: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status, Error string
		Data          struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("prometheus query %s: %s: %w", duplicateRatioRule, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus query %s: %s: %s", duplicateRatioRule, resp.Status, body.Error)
	}
	out := map[string]float64{}
	for _, s := range body.Data.Result {
		text, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus query %s: value %q: %w", duplicateRatioRule, text, err)
		}
		out[s.Metric["group"]] = v
	}
	return out, nil
}
