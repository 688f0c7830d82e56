package redisfast_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's "Redis fast path" code block is fastDedup's body (example_test.go), line for line (leading
// and trailing blanks aside), so the wiring users copy is the one that compiles.
func TestS8_READMEWiringIsTheCompiledExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	section := strings.SplitN(string(readme), "\n## Redis fast path\n", 2)
	require.Len(t, section, 2, "README has no \"## Redis fast path\" section")
	block := between(t, section[1], "```go\n", "\n```")

	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	body := between(t, string(src), "func fastDedup(", "\n}\n")
	body = body[strings.Index(body, "{\n")+2:] // drop the signature
	require.Equal(t, trimLines(body), trimLines(block))
}

// between returns the text of s after the first start up to the next end.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	i := strings.Index(s, start)
	require.GreaterOrEqual(t, i, 0, "no %q", start)
	s = s[i+len(start):]
	j := strings.Index(s, end)
	require.GreaterOrEqual(t, j, 0, "no %q after %q", end, start)
	return s[:j]
}

// trimLines returns s's lines with their blanks trimmed (gofmt aligns comments with spaces).
func trimLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}
