package dedup_test

import (
	"testing"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// docs/versions.md's business action is reserveOnce's body, line for line (leading blanks aside), up to its
// final return: the code users copy is the code that compiles.
func TestVersionsGuideActionIsTheCompiledExample(t *testing.T) {
	testenv.DocBlockIsBody(t, "docs/versions.md", "[dedup/transition_example_test.go](../dedup/transition_example_test.go)):",
		"transition_example_test.go",
		"func reserveOnce() (func(ctx context.Context, tx *sqlx.Tx, changeID, sku string, qty int) error, error) {\n",
		"return reserve, nil")
}
