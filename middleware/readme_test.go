package middleware_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// The "Wiring a consumer" code block of docs/wiring-and-handlers.md is wire's body, line for line (leading
// blanks aside): the code users copy is the code that compiles.
func TestREADMEWiringIsTheCompiledExample(t *testing.T) {
	block := testenv.DocBlock(t, "docs/wiring-and-handlers.md", "## Wiring a consumer")
	body := testenv.Between(t, "example_test.go", "func wire(ctx context.Context, dsn string, logger *zap.Logger) error {\n", "\n}\n")
	require.Equal(t, testenv.Lines(block), testenv.Lines(body))
}
