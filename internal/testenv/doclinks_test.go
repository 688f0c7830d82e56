package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// Every relative link of the README and the guides under docs/ names a file of the repository, and a
// link with a #fragment names a heading of its Markdown target, so that moving a folder or renaming a
// section cannot leave a reader at a dead link.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range append([]string{filepath.Join(root, "README.md")}, guides...) {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, file)
		for _, m := range link.FindAllStringSubmatch(string(src), -1) {
			target, fragment, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") {
				continue
			}
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: no such file", rel, m[1])
				continue
			}
			if fragment != "" && strings.HasSuffix(path, ".md") && !hasHeading(t, path, fragment) {
				t.Errorf("%s: link %q: no such heading", rel, m[1])
			}
		}
	}
}

// hasHeading reports whether the Markdown file at path has a heading whose GitHub anchor is anchor:
// lowercased, punctuation other than '-' and '_' dropped, spaces made '-'.
func hasHeading(t *testing.T, path, anchor string) bool {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
