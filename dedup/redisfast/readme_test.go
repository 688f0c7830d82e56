package redisfast_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// S8: the "Redis fast path" code block of docs/configuration.md is fastDedup's body (example_test.go), line
// for line (leading and trailing blanks aside), so the wiring users copy is the one that compiles.
func TestRedisFast_GuideWiringIsTheCompiledExample(t *testing.T) {
	block := testenv.DocBlock(t, "docs/configuration.md", "## Redis fast path")
	body := testenv.Between(t, "example_test.go",
		"func fastDedup(store *dedup.Store, reg prometheus.Registerer) (middleware.Middleware, func() error, error) {\n", "\n}\n")
	require.Equal(t, testenv.Lines(body), testenv.Lines(block))
}
