package consumer

import (
	"fmt"
	"strings"
)

// tagFilter is a parsed subscription tag expression: "*" (every tag, also none) or tags joined by "||",
// as the broker's TAG selector reads them.
type tagFilter struct {
	all  bool
	tags map[string]bool
}

// parseTagExpression parses expr: "" or "*" match every message; "A || B" matches tags A and B exactly.
// It returns an error for an empty tag (e.g. "A ||"), a "*" among tags, or a tag with spaces inside.
func parseTagExpression(expr string) (tagFilter, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return tagFilter{all: true}, nil
	}
	f := tagFilter{tags: map[string]bool{}}
	for i, part := range strings.Split(expr, "||") {
		tag := strings.TrimSpace(part)
		switch {
		case tag == "":
			return tagFilter{}, fmt.Errorf("tag %d of %q is empty", i+1, expr)
		case tag == "*":
			return tagFilter{}, fmt.Errorf("%q mixes * with tags; use * alone", expr)
		case strings.ContainsAny(tag, " \t|"):
			return tagFilter{}, fmt.Errorf("tag %q in %q contains a space or |; separate tags with ||", tag, expr)
		}
		f.tags[tag] = true
	}
	return f, nil
}

// matches reports whether a message with tag passes the filter.
func (f tagFilter) matches(tag string) bool { return f.all || f.tags[tag] }
