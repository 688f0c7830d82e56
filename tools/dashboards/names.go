package dashboards

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaInterval matches Grafana's interval variables ($__rate_interval, ${__interval}, $__range, …),
// which stand for a duration inside a range selector.
var grafanaInterval = regexp.MustCompile(`\$\{?__[A-Za-z_]+\}?`)

// MetricNames returns the metric names that query selects, sorted and without repeats: the name of every
// vector and range selector (`foo{…}`, `{__name__="foo"}`). Grafana's interval variables are replaced by
// 5m first; other variables may appear only inside label values (`{group=~"$group"}`). A query that does
// not parse, or a selector without an exact metric name (`{__name__=~"rmq.*"}`), is an error.
func MetricNames(query string) ([]string, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaInterval.ReplaceAllString(query, "5m"))
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", query, err)
	}
	seen := map[string]bool{}
	var selErr error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := selectorName(vs)
		if name == "" {
			selErr = fmt.Errorf("%q: selector %s has no exact metric name", query, vs)
			return selErr
		}
		seen[name] = true
		return nil
	})
	if selErr != nil {
		return nil, selErr
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// selectorName is the selector's metric name, from its name or an equality matcher on __name__.
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// CounterValues returns the counters that query reads as they are rather than over a range, sorted and
// without repeats: every selector of a counter series (a name ending in _total, or a histogram's _bucket,
// _count or _sum) that is not the inside of a range selector (`x_total[5m]`). Such a figure drops to 0
// when the consumer restarts and vanishes when it stops; rate() or increase() over a range counts across
// both. Errors as MetricNames.
func CounterValues(query string) ([]string, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaInterval.ReplaceAllString(query, "5m"))
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", query, err)
	}
	seen := map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || !counterName(selectorName(vs)) {
			return nil
		}
		if len(path) > 0 {
			if _, inRange := path[len(path)-1].(*parser.MatrixSelector); inRange {
				return nil
			}
		}
		seen[selectorName(vs)] = true
		return nil
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// counterName reports whether name is a counter series by Prometheus's naming conventions.
func counterName(name string) bool {
	for _, suffix := range []string{"_total", "_bucket", "_count", "_sum"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// LabelRegexps returns the regular expressions that query matches label against (`label=~"…"`), in
// the order they appear. Errors as MetricNames.
func LabelRegexps(query, label string) ([]string, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaInterval.ReplaceAllString(query, "5m"))
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", query, err)
	}
	var out []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == label && m.Type == labels.MatchRegexp {
					out = append(out, m.Value)
				}
			}
		}
		return nil
	})
	return out, nil
}
