package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocBlock returns the first ```go block after the line heading (a heading such as "## Wiring a consumer",
// or any whole line) in file, a Markdown file named from the repository's root ("README.md",
// "docs/effects.md"), without its fences; the test fails when there is none.
func DocBlock(t testing.TB, file, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(), filepath.FromSlash(file)))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q heading", file, heading)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatalf("%s has no ```go block after %q", file, heading)
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		t.Fatalf("%s's ```go block after %q is not closed", file, heading)
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
// compares equal to the same code at the left margin of a Markdown block.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// DocBlockIsBody fails t unless the ```go block after the line after in doc (DocBlock) is, line for line
// (Lines), the body of the function that starts with start in file (Between, up to "\n}\n") without its
// last line, which must be last: a guide's block that stops before the compiled function's final return.
func DocBlockIsBody(t testing.TB, doc, after, file, start, last string) {
	t.Helper()
	body := Lines(Between(t, file, start, "\n}\n"))
	if body[len(body)-1] != last {
		t.Fatalf("%s: the function's last line is %q, not %q", file, body[len(body)-1], last)
	}
	block := Lines(DocBlock(t, doc, after))
	if strings.Join(block, "\n") != strings.Join(body[:len(body)-1], "\n") {
		t.Fatalf("%s's block after %q differs from %s's function:\n%s\n---\n%s", doc, after, file,
			strings.Join(block, "\n"), strings.Join(body[:len(body)-1], "\n"))
	}
}
