package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// installBlockers returns the go.mod directives that make `go install <pkg>@<version>` refuse the module
// (the go command rejects a module providing the named packages whose go.mod has replace or exclude
// directives): replace and exclude, single-line or block form, each with its line number. Comments are
// ignored.
func installBlockers(gomod []byte) []string {
	var found []string
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(strings.ReplaceAll(line, "(", " ( "))
		if len(fields) > 0 && (fields[0] == "replace" || fields[0] == "exclude") {
			found = append(found, "line "+strconv.Itoa(n)+": "+strings.TrimSpace(line))
		}
	}
	return found
}

func TestGoMod_InstallBlockersAreFound(t *testing.T) {
	gomod := []byte("module example.com/m\n\ngo 1.26.0\n\n// replace in a comment is fine\n" +
		"require (\n\tgithub.com/a/b v1.0.0 // replace me later\n)\n" +
		"replace github.com/a/b => ../b\n" +
		"exclude(\n\tgithub.com/c/d v1.2.0\n)\n")
	got := installBlockers(gomod)
	want := []string{"line 9: replace github.com/a/b => ../b", "line 10: exclude("}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("installBlockers = %q, want %q", got, want)
	}
}

// TestGoMod_GoInstallAtVersionIsNotBlocked guards the README's `go install …/cmd/rmqguard@latest`: the
// module's go.mod names the module path it is published at and has no replace or exclude directive.
// scripts/check-go-install.sh proves the whole install against a local file proxy.
func TestGoMod_GoInstallAtVersionIsNotBlocked(t *testing.T) {
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatalf("read go.mod: %v", err)
	}
	if !bytes.HasPrefix(gomod, []byte("module github.com/rmqguard/rmqguard\n")) {
		t.Errorf("go.mod does not start with `module github.com/rmqguard/rmqguard`: go install …@version needs the published path")
	}
	if b := installBlockers(gomod); len(b) > 0 {
		t.Errorf("go.mod has directives that make `go install github.com/rmqguard/rmqguard/cmd/rmqguard@latest` fail; "+
			"move them out (a go.work for local development) or drop them:\n%s", strings.Join(b, "\n"))
	}
}
