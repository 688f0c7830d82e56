package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// READMEBlock returns the first ```go block after the line heading (e.g. "## Wiring a consumer") in the
// repository's README.md, without its fences; the test fails when there is none.
func READMEBlock(t testing.TB, heading string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatalf("read README.md: %v", err)
	}
	_, section, ok := strings.Cut(string(readme), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q heading", heading)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatalf("README.md has no ```go block after %q", heading)
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		t.Fatalf("README.md's ```go block after %q is not closed", heading)
	}
	return block + "\n"
}

// Between returns the text of file (a path relative to the test's package) between the first start and the
// first end after it; the test fails when either is missing.
func Between(t testing.TB, file, start, end string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	_, body, ok := strings.Cut(string(src), start)
	if !ok {
		t.Fatalf("%s has no %q", file, start)
	}
	body, _, ok = strings.Cut(body, end)
	if !ok {
		t.Fatalf("%s has no %q after %q", file, end, start)
	}
	return body
}

// Lines returns s's lines without their leading and trailing blanks, so that code indented in a function
// compares equal to the same code at the left margin of the README.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}
