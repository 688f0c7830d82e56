package middleware_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// docs/versions.md's hand-built Version chain is orderPaidChain's body, line for line (leading blanks aside),
// up to its final return: the code users copy is the code that compiles.
func TestVersionsGuideChainIsTheCompiledExample(t *testing.T) {
	block := testenv.DocBlock(t, "docs/versions.md", "[middleware/version_example_test.go](../middleware/version_example_test.go)):")
	body := testenv.Lines(testenv.Between(t, "version_example_test.go",
		"func orderPaidChain(store *dedup.Store, eventID middleware.Middleware) (consumer.Handler, error) {\n", "\n}\n"))
	require.Equal(t, "return handler, err", body[len(body)-1])
	require.Equal(t, body[:len(body)-1], testenv.Lines(block))
}
