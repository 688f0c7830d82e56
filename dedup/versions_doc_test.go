package dedup_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// docs/versions.md's business action is reserveOnce's body, line for line (leading blanks aside), up to its
// final return: the code users copy is the code that compiles.
func TestVersionsGuideActionIsTheCompiledExample(t *testing.T) {
	block := testenv.DocBlock(t, "docs/versions.md", "[dedup/transition_example_test.go](../dedup/transition_example_test.go)):")
	body := testenv.Lines(testenv.Between(t, "transition_example_test.go",
		"func reserveOnce() (func(ctx context.Context, tx *sqlx.Tx, changeID, sku string, qty int) error, error) {\n", "\n}\n"))
	require.Equal(t, "return reserve, nil", body[len(body)-1])
	require.Equal(t, body[:len(body)-1], testenv.Lines(block))
}
