package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCountDir_CountsExportedDeclsAndMethodsOfExportedTypesOnly(t *testing.T) {
	decls, methods, found, err := countDir("testdata/api")
	if err != nil || !found {
		t.Fatalf("countDir: found=%v err=%v", found, err)
	}
	// Alpha, Beta, Default, Config, Runner, Box, New, Gauge; Config.Valid, Config.WithLimit, Runner.Run, Box.Get.
	if decls != 8 || methods != 4 {
		t.Fatalf("decls=%d methods=%d, want 8 and 4", decls, methods)
	}
}

func TestCountModule_LeavesOutInternalToolsCmdAndExamplesUnlessAll(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/m\n\ngo 1.22\n")
	write(t, root, "pub/a.go", "package pub\n\nfunc A() {}\n")
	for _, dir := range []string{"internal/x", "tools/x", "cmd/x", "examples/x", "pub/testdata"} {
		write(t, root, dir+"/x.go", "package x\n\nfunc X() {}\n\nfunc Y() {}\n")
	}
	modPath, err := modulePath(root)
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := countModule(root, modPath, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []pkgSize{{path: "example.com/m/pub", decls: 1}}; !reflect.DeepEqual(sizes, want) {
		t.Fatalf("sizes = %+v, want %+v", sizes, want)
	}
	sizes, err = countModule(root, modPath, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 5 { // testdata stays out
		t.Fatalf("with -all: %+v, want 5 packages", sizes)
	}
}

func TestRun_PrintsAPackageLineAndATotalLine(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/m\n")
	write(t, root, "a/a.go", "package a\n\ntype T int\n\nfunc (T) M() {}\n")
	write(t, root, "b/b.go", "package b\n\nconst C, D = 1, 2\n")
	var out bytes.Buffer
	if err := run([]string{"-root", root}, &out, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[3]), " ") != "total (2 packages) 3 1 4" {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestCountUses_CountsDistinctNamesAndTheMethodsAndFieldsOfModuleTypes(t *testing.T) {
	u, err := countUses("testdata/use/main.go", "github.com/rmqguard/rmqguard")
	if err != nil {
		t.Fatal(err)
	}
	if !u.typed {
		t.Fatalf("not type-checked: %v", u.typeErr)
	}
	want := []string{"api.Alpha", "api.Config", "api.Config.Name", "api.Config.Valid", "api.Config.WithLimit", "api.New"}
	if !reflect.DeepEqual(u.names, want) || !reflect.DeepEqual(u.packages, []string{"api"}) {
		t.Fatalf("names %v in %v, want %v in [api]", u.names, u.packages, want)
	}
}

func TestQualifiedUses_WithoutTypesCountsPackageQualifiedNamesOnly(t *testing.T) {
	src := `package main

import (
	"fmt"

	a "github.com/rmqguard/rmqguard/tools/apisize/testdata/api"
)

func main() { c := a.New("x"); fmt.Println(c.Valid(), a.New("y"), a.Alpha) }
`
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	u := qualifiedUses(f, "github.com/rmqguard/rmqguard", os.ErrNotExist)
	if want := []string{"api.Alpha", "api.New"}; !reflect.DeepEqual(u.names, want) || u.typed {
		t.Fatalf("names %v (typed %v), want %v untyped", u.names, u.typed, want)
	}
	var out bytes.Buffer
	printUses(&out, u)
	if !strings.Contains(out.String(), "package-qualified names only") {
		t.Fatalf("output does not say it was not type-checked:\n%s", out.String())
	}
}

func write(t *testing.T, root, name, content string) {
	t.Helper()
	path := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
