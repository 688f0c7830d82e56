package dedup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rmqguard/rmqguard/dedup"
)

func TestValidIdentifier(t *testing.T) {
	for _, ok := range []string{"orders", "order_no", "_x", "T1", strings.Repeat("a", 64)} {
		if err := dedup.ValidIdentifier(ok); err != nil {
			t.Errorf("ValidIdentifier(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "1orders", "orders;drop", "order-no", "`orders`", "ordérs", "a b", strings.Repeat("a", 65)} {
		err := dedup.ValidIdentifier(bad)
		if !errors.Is(err, dedup.ErrInvalidIdentifier) {
			t.Errorf("ValidIdentifier(%q) = %v, want ErrInvalidIdentifier", bad, err)
		}
	}
}
