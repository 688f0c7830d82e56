// Package dashboards checks the operator files of deploy/ against the code: every PromQL expression of the
// Grafana dashboard (deploy/grafana/rmqguard.json) and of the Prometheus rules (deploy/prometheus/rules.yml)
// must name only series that exist — a metric registered by metrics.New or metrics.NewOutbox (a histogram as its _bucket, _sum
// and _count series) or a recording rule of rules.yml. A renamed metric then fails a test instead of
// leaving an empty panel or an alert that can never fire.
package dashboards

// Expr is one PromQL expression and where it was found (a panel title and target, a rule name, a
// template variable), for error messages.
type Expr struct {
	Where string
	Query string
}
