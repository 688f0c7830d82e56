package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const maxDocLines = 6

// An exported name's doc comment in every library package (consumer to topics) says
// shape, units, default and errors in at most six lines; the rules it cites live once in the package's
// doc.go (the package comment, which this does not limit).
func TestExportedDocCommentsAreAtMostSixLines(t *testing.T) {
	for _, pkg := range []string{"dedup", "dedup/redisfast", "dlq", "outbox", "retry", "metrics", "topics", "middleware", "consumer"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(repoRoot(), pkg), func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		require.NoError(t, err, pkg)
		for _, p := range pkgs {
			for name, f := range p.Files {
				for _, long := range longDocComments(fset, f) {
					t.Errorf("%s: %s: a doc comment of at most %d lines says shape, units, default and errors; move the rules to doc.go",
						filepath.Join(pkg, filepath.Base(name)), long, maxDocLines)
				}
			}
		}
	}
}

// longDocComments names the exported declarations of f (types, functions, methods, fields, constants and
// variables) whose doc comment is longer than maxDocLines lines, each with its position and line count.
func longDocComments(fset *token.FileSet, f *ast.File) []string {
	var out []string
	check := func(name *ast.Ident, doc *ast.CommentGroup) {
		if doc == nil || !name.IsExported() {
			return
		}
		if n := len(strings.Split(strings.TrimRight(doc.Text(), "\n"), "\n")); n > maxDocLines {
			out = append(out, strconv.Itoa(fset.Position(doc.Pos()).Line)+": "+name.Name+" ("+strconv.Itoa(n)+" lines)")
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch d := n.(type) {
		case *ast.FuncDecl:
			check(d.Name, d.Doc)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					check(s.Name, pick(s.Doc, d.Doc, len(d.Specs)))
				case *ast.ValueSpec:
					for _, id := range s.Names {
						check(id, pick(s.Doc, d.Doc, len(d.Specs)))
					}
				}
			}
		case *ast.Field:
			for _, id := range d.Names {
				check(id, d.Doc)
			}
		}
		return true
	})
	return out
}

// pick is a spec's own doc comment, or its declaration's when the declaration holds that spec alone.
func pick(spec, decl *ast.CommentGroup, specs int) *ast.CommentGroup {
	if spec == nil && specs == 1 {
		return decl
	}
	return spec
}
