package main

import (
	"strings"
	"testing"
)

func mod(rel string) string { return module + "/" + rel }

// An import of a higher layer, and a test's import of examples from below, are reported; a test of
// consumer may import middleware and internal/testenv.
func TestCheck_ReportsImportsThatPointUp(t *testing.T) {
	got := check([]pkg{
		{ImportPath: mod("consumer"), Imports: []string{mod("internal/rmq"), mod("dedup")},
			XTestImports: []string{mod("middleware"), mod("internal/testenv")}},
		{ImportPath: mod("dedup"), XTestImports: []string{mod("examples/shop")}},
		{ImportPath: mod("internal/rmq"), Imports: []string{"fmt"}},
	})
	want := []string{
		"consumer (consumer) imports dedup (dedup): a higher layer",
		"dedup (dedup) tests import examples/shop (examples): a higher layer",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Two folders of one layer that import each other form a cycle; a package of no declared folder is named.
func TestCheck_ReportsFolderCyclesAndUndeclaredPackages(t *testing.T) {
	got := check([]pkg{
		{ImportPath: mod("dlq"), Imports: []string{mod("outbox")}},
		{ImportPath: mod("outbox/x"), Imports: []string{mod("dlq")}},
		{ImportPath: mod("newthing")},
	})
	want := []string{
		"newthing: in no layer (add its folder to tools/layers)",
		"folders form a cycle: dlq → outbox → dlq",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
