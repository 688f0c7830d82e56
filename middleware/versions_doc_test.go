package middleware_test

import (
	"testing"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// docs/versions.md's hand-built Version chain is orderPaidChain's body, line for line (leading blanks aside),
// up to its final return: the code users copy is the code that compiles.
func TestVersionsGuideChainIsTheCompiledExample(t *testing.T) {
	testenv.DocBlockIsBody(t, "docs/versions.md", "[middleware/version_example_test.go](../middleware/version_example_test.go)):",
		"version_example_test.go",
		"func orderPaidChain(store *dedup.Store, eventID middleware.Middleware) (consumer.Handler, error) {\n",
		"return handler, err")
}
