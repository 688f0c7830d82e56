package dedup

import (
	"strings"
)

// quote returns name in backquotes; name must have passed dedupsql.ValidIdentifier.
func quote(name string) string { return "`" + name + "`" }

// namedTwice returns, of the column names in cols, one that another key of cols names too without regard
// to case (MySQL column names are case-insensitive: "qty" and "QTY" are one column), or "" when none does.
func namedTwice(cols map[string]any) string {
	seen := make(map[string]bool, len(cols))
	for col := range cols {
		lower := strings.ToLower(col)
		if seen[lower] {
			return col
		}
		seen[lower] = true
	}
	return ""
}
