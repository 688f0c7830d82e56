package dashboards

import "fmt"

// Unknown returns one line per name that an expression selects and known does not contain ("panel "Outcomes"
// target A: unknown series rmqguard_message_total"), and one per expression that does not parse; nil when
// every expression names only known series.
func Unknown(exprs []Expr, known map[string]bool) []string {
	var problems []string
	for _, e := range exprs {
		names, err := MetricNames(e.Query)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", e.Where, err))
			continue
		}
		for _, n := range names {
			if !known[n] {
				problems = append(problems, fmt.Sprintf("%s: unknown series %s in %q", e.Where, n, e.Query))
			}
		}
	}
	return problems
}
