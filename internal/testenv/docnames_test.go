package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docPackages are the public packages the README and the guides name, by the name a reader writes, with
// their folder.
var docPackages = map[string]string{
	"consumer": "consumer", "dedup": "dedup", "redisfast": "dedup/redisfast", "middleware": "middleware",
	"dlq": "dlq", "outbox": "outbox", "metrics": "metrics", "retry": "retry", "topics": "topics",
}

// Every pkg.Name and pkg.Type.Member the README and the guides under docs/ write, for rmqguard's public
// packages, is an exported identifier of that package (a member: a method or a field of that type), so
// that cutting or renaming a public name cannot leave a guide pointing at something go doc cannot find.
func TestDocNamesResolve(t *testing.T) {
	root := repoRoot()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	apis := map[string]map[string]map[string]bool{}
	for name, dir := range docPackages {
		apis[name] = exportedAPI(t, filepath.Join(root, filepath.FromSlash(dir)))
	}
	ref := regexp.MustCompile(`\b(consumer|dedup|redisfast|middleware|dlq|outbox|metrics|retry|topics)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	checked := 0
	for _, file := range append([]string{filepath.Join(root, "README.md")}, guides...) {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, file)
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			checked++
			members, ok := apis[m[1]][m[2]]
			if !ok {
				t.Errorf("%s: %s.%s is not an exported name of %s", rel, m[1], m[2], docPackages[m[1]])
				continue
			}
			if m[3] != "" && !members[m[3]] {
				t.Errorf("%s: %s.%s.%s: %s has no exported method or field %s", rel, m[1], m[2], m[3], m[2], m[3])
			}
		}
	}
	require.Greater(t, checked, 50, "the README and the guides name the API")
}

// exportedAPI returns the exported top-level names of the package in dir (test files left out), each with
// the exported methods and fields (struct fields, interface methods) of the type it names.
func exportedAPI(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	require.NoError(t, err)
	api := map[string]map[string]bool{}
	add := func(name string) map[string]bool {
		if api[name] == nil {
			api[name] = map[string]bool{}
		}
		return api[name]
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						if d.Name.IsExported() {
							add(d.Name.Name)
						}
					} else if d.Name.IsExported() {
						add(receiverType(d.Recv.List[0].Type))[d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								members := add(s.Name.Name)
								for _, m := range typeMembers(s.Type) {
									members[m] = true
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									add(n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	return api
}

// receiverType is the name of a method's receiver type (T, *T, T[P] or *T[P]).
func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.IndexExpr:
		return receiverType(x.X)
	case *ast.IndexListExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// typeMembers returns the exported fields of a struct type or the exported methods of an interface type.
func typeMembers(e ast.Expr) []string {
	var list *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, n.Name)
			}
		}
		if len(f.Names) == 0 { // embedded: its type's name is the field's
			if name := receiverType(f.Type); ast.IsExported(name) {
				out = append(out, name)
			}
		}
	}
	return out
}
