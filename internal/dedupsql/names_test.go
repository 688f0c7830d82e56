package dedupsql

import (
	"errors"
	"strings"
	"testing"
)

// Plain names up to MySQL's 64 characters pass; empty, too long, leading digit, punctuation, quotes,
// non-ASCII and spaces are refused with ErrInvalidIdentifier.
func TestValidIdentifier_AcceptsOnlyPlainNames(t *testing.T) {
	for _, ok := range []string{"orders", "order_no", "_x", "T1", strings.Repeat("a", 64)} {
		if err := ValidIdentifier(ok); err != nil {
			t.Errorf("ValidIdentifier(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "1orders", "orders;drop", "order-no", "`orders`", "ordérs", "a b", strings.Repeat("a", 65)} {
		err := ValidIdentifier(bad)
		if !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("ValidIdentifier(%q) = %v, want ErrInvalidIdentifier", bad, err)
		}
	}
}
