package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// grafanaDashboard is the part of a Grafana dashboard JSON model that holds queries.
type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row holds its panels
}

type grafanaVariable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"` // a string, or {"query": "…"} in newer dashboards
}

// labelValues matches Grafana's label_values(metric_or_selector, label) template query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// DashboardExprs returns the PromQL expressions of a Grafana dashboard (JSON model): every panel target's
// expr (panels inside rows included) and the queries of "query" template variables (label_values(X, l)
// gives X; query_result(X) gives X). It is an error when the JSON does not parse or a panel target has an
// empty expr.
func DashboardExprs(dashboard []byte) ([]Expr, error) {
	var d grafanaDashboard
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []Expr
	if err := panelExprs(d.Panels, &out); err != nil {
		return nil, err
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v)
		if err != nil {
			return nil, err
		}
		out = append(out, Expr{Where: "variable $" + v.Name, Query: q})
	}
	return out, nil
}

func panelExprs(panels []grafanaPanel, out *[]Expr) error {
	for _, p := range panels {
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) == "" {
				return fmt.Errorf("dashboard: panel %q target %s: empty expr", p.Title, t.RefID)
			}
			*out = append(*out, Expr{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Query: t.Expr})
		}
		if err := panelExprs(p.Panels, out); err != nil {
			return err
		}
	}
	return nil
}

// variableQuery returns the PromQL inside a query variable's definition.
func variableQuery(v grafanaVariable) (string, error) {
	var q string
	if err := json.Unmarshal(v.Query, &q); err != nil {
		var obj struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &obj); err != nil {
			return "", fmt.Errorf("dashboard: variable $%s: query is neither a string nor {\"query\": …}: %w", v.Name, err)
		}
		q = obj.Query
	}
	if m := labelValues.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	if inner, ok := strings.CutPrefix(strings.TrimSpace(q), "query_result("); ok {
		return strings.TrimSuffix(inner, ")"), nil
	}
	return "", fmt.Errorf("dashboard: variable $%s: query %q is not label_values(X, label) or query_result(X)", v.Name, q)
}
