package dedup

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidIdentifier means a table or column name given to a helper is not a plain SQL identifier.
// Test with errors.Is.
var ErrInvalidIdentifier = errors.New("dedup: not a plain SQL identifier")

// maxIdentifierLength is MySQL's limit for table and column names.
const maxIdentifierLength = 64

// ValidIdentifier checks that name can be used as a table or column name without quoting problems: 1..64
// characters, ASCII letters, digits and '_', not starting with a digit. Names are written into SQL text
// (placeholders cannot stand for identifiers), so anything else is refused rather than escaped. It
// returns an error wrapping ErrInvalidIdentifier that quotes the name and says what is wrong.
func ValidIdentifier(name string) error {
	if name == "" || len(name) > maxIdentifierLength {
		return fmt.Errorf("%w: %q must have 1..%d characters", ErrInvalidIdentifier, name, maxIdentifierLength)
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return fmt.Errorf("%w: %q may hold only ASCII letters, digits and '_', and must not start with a digit",
				ErrInvalidIdentifier, name)
		}
	}
	return nil
}

// quote returns name in backquotes; name must have passed ValidIdentifier.
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
