package dashboards

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ruleFile is the part of a Prometheus rule file that names rules and holds their expressions.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// Rules returns, from a Prometheus rule file (YAML), the names of its recording rules and the expressions
// of all its rules. It is an error when the YAML does not parse or a rule lacks a name or an expression.
// (promtool check rules, run by make test-rules, is the full syntax check.)
func Rules(file []byte) (recorded []string, exprs []Expr, err error) {
	var f ruleFile
	if err := yaml.Unmarshal(file, &f); err != nil {
		return nil, nil, fmt.Errorf("rules: %w", err)
	}
	for _, g := range f.Groups {
		for i, r := range g.Rules {
			name := r.Record
			if name == "" {
				name = r.Alert
			}
			if name == "" || r.Expr == "" {
				return nil, nil, fmt.Errorf("rules: group %s rule %d: want record or alert, and expr", g.Name, i+1)
			}
			if r.Record != "" {
				recorded = append(recorded, r.Record)
			}
			exprs = append(exprs, Expr{Where: "rule " + name, Query: r.Expr})
		}
	}
	return recorded, exprs, nil
}
