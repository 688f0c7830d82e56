package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// The README's "A consumer in one file" is this command's main.go, byte for byte, so the file users copy is
// the one that compiles (and that TestE2E_READMEMinimalConsumerAppliesEachEventOnce runs); and its
// wiring, run's body, stays within 20 lines.
func TestREADMEMinimalConsumerIsThisFile(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	assert.Equal(t, string(src), testenv.DocBlock(t, "README.md", "## A consumer in one file"))

	body := testenv.Between(t, "main.go", "func run() error {\n", "\n}\n")
	assert.LessOrEqual(t, len(strings.Split(body, "\n")), 20, "run's body is the wiring:\n%s", body)
}
