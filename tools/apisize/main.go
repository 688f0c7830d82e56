// Command apisize prints the size of rmqguard's API: per package of the module, the exported identifiers of its
// non-test files. With -uses FILE it prints instead the distinct rmqguard identifiers that one Go file uses.
//
// What counts as one exported identifier:
//   - a top-level const, var, type or func whose name is exported (column "decls");
//   - an exported method of an exported type, the interface's methods included (column "methods").
//
// Fields of structs are not counted. Packages under internal/, tools/, cmd/ and examples/ (and any testdata)
// are left out unless -all is given.
//
// -uses type-checks the file (go/types, export data from `go list -export`) and counts each distinct
// package-level name of the module it refers to (consumer.New) and each method or field it selects on or
// names in a literal of a module type (consumer.Config.Group). If the file does not type-check it falls back
// to the package-qualified names only, and says so.
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "apisize:", err)
		os.Exit(2)
	}
}

// notPublic reports whether a top-level folder's packages are not part of the public API.
func notPublic(top string) bool {
	switch top {
	case "internal", "tools", "cmd", "examples":
		return true
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("apisize", flag.ContinueOnError)
	fl.SetOutput(stderr)
	root := fl.String("root", ".", "the module's root folder (where go.mod is)")
	all := fl.Bool("all", false, "also count packages under internal/, tools/, cmd/ and examples/")
	uses := fl.String("uses", "", "count instead the distinct module identifiers this Go file uses")
	fl.Usage = func() {
		fmt.Fprint(stderr, `usage: apisize [-root DIR] [-all] [-uses FILE]

Per package of the module (non-test files), the exported identifiers:
  decls    top-level consts, vars, types and funcs with an exported name
  methods  exported methods of exported types (interface methods included)
  total    decls + methods; struct fields are not counted
and a total line. Packages under internal/, tools/, cmd/, examples/ and testdata/ are left out unless -all.

-uses FILE: the distinct identifiers of the module FILE uses: package-level names (consumer.New) and methods
and fields selected on, or named in literals of, the module's types (consumer.Config.Group), with the
number of packages they come from. The file is type-checked; if that fails only package-qualified names
are counted, and the output says so.

`)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	modPath, err := modulePath(*root)
	if err != nil {
		return err
	}
	if *uses != "" {
		u, err := countUses(*uses, modPath)
		if err != nil {
			return err
		}
		printUses(stdout, u)
		return nil
	}
	sizes, err := countModule(*root, modPath, *all)
	if err != nil {
		return err
	}
	printSizes(stdout, sizes)
	return nil
}

// modulePath reads the module path from root/go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read the module path: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("read the module path: no module line in %s", filepath.Join(root, "go.mod"))
}

// pkgSize is one package's count.
type pkgSize struct {
	path    string // import path
	decls   int
	methods int
}

// countModule counts every package below root, in import-path order.
func countModule(root, modPath string, all bool) ([]pkgSize, error) {
	var sizes []pkgSize
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		if !all && rel != "." && notPublic(strings.SplitN(rel, "/", 2)[0]) {
			return filepath.SkipDir
		}
		decls, methods, found, err := countDir(dir)
		if err != nil {
			return err
		}
		if found {
			path := modPath
			if rel != "." {
				path += "/" + rel
			}
			sizes = append(sizes, pkgSize{path: path, decls: decls, methods: methods})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the packages below %s: %w", root, err)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i].path < sizes[j].path })
	return sizes, nil
}

// countDir counts the exported identifiers of the non-test Go files in dir; found is false when it has none.
func countDir(dir string) (decls, methods int, found bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, false, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		match, err := build.Default.MatchFile(dir, n)
		if err != nil {
			return 0, 0, false, fmt.Errorf("read the build constraints of %s: %w", filepath.Join(dir, n), err)
		}
		if !match {
			continue // excluded by its build constraints on this platform (//go:build ignore, _windows.go)
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, 0, false, fmt.Errorf("parse %s: %w", filepath.Join(dir, n), err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return 0, 0, false, nil
	}
	decls, methods = countFiles(files)
	return decls, methods, true, nil
}

// countFiles counts the exported top-level names and the exported methods of exported types of one package.
func countFiles(files []*ast.File) (decls, methods int) {
	exportedTypes := map[string]bool{}
	var recvs []string // receiver type of each exported method
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					decls++
					continue
				}
				recvs = append(recvs, receiverName(d.Recv.List[0].Type))
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								decls++
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						decls++
						exportedTypes[s.Name.Name] = true
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							methods += exportedInterfaceMethods(it)
						}
					}
				}
			}
		}
	}
	for _, r := range recvs {
		if exportedTypes[r] {
			methods++
		}
	}
	return decls, methods
}

// receiverName is the type name of a method's receiver: T for T, *T, T[K] and *T[K].
func receiverName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// exportedInterfaceMethods counts the exported methods an interface declares itself (not embedded ones).
func exportedInterfaceMethods(it *ast.InterfaceType) int {
	n := 0
	for _, m := range it.Methods.List {
		if _, ok := m.Type.(*ast.FuncType); !ok {
			continue // an embedded interface or a type constraint
		}
		for _, name := range m.Names {
			if name.IsExported() {
				n++
			}
		}
	}
	return n
}

func printSizes(w io.Writer, sizes []pkgSize) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "package\tdecls\tmethods\ttotal\t")
	var decls, methods int
	for _, s := range sizes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", s.path, s.decls, s.methods, s.decls+s.methods)
		decls += s.decls
		methods += s.methods
	}
	fmt.Fprintf(tw, "total (%d packages)\t%d\t%d\t%d\t\n", len(sizes), decls, methods, decls+methods)
	_ = tw.Flush()
}

// usage is what one file uses of the module.
type usage struct {
	names    []string // sorted, distinct: pkg.Name or pkg.Type.Member
	packages []string // sorted, distinct package names
	typed    bool     // false: only package-qualified names were counted
	typeErr  error    // why type-checking failed, when !typed
}

// countUses counts the distinct identifiers of the module modPath that the Go file at path uses.
func countUses(path, modPath string) (usage, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return usage{}, fmt.Errorf("parse %s: %w", path, err)
	}
	inModule := func(p *types.Package) bool {
		return p != nil && (p.Path() == modPath || strings.HasPrefix(p.Path(), modPath+"/"))
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	exports, typeErr := exportFiles(filepath.Dir(path), f)
	if typeErr == nil {
		lookup := func(p string) (io.ReadCloser, error) {
			file, ok := exports[p]
			if !ok {
				return nil, fmt.Errorf("no export data for %s", p)
			}
			return os.Open(file)
		}
		conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
		_, typeErr = conf.Check(f.Name.Name, fset, []*ast.File{f}, info)
	}
	if typeErr != nil {
		return qualifiedUses(f, modPath, typeErr), nil
	}
	names, pkgs := map[string]bool{}, map[string]bool{}
	for _, obj := range info.Uses {
		if obj == nil || !obj.Exported() || !inModule(obj.Pkg()) {
			continue
		}
		name, ok := qualifiedName(obj)
		if !ok {
			continue
		}
		names[name] = true
		pkgs[obj.Pkg().Name()] = true
	}
	return usage{names: sortedKeys(names), packages: sortedKeys(pkgs), typed: true}, nil
}

// exportFiles builds the file's imports and their dependencies (`go list -export -deps`, run in dir so that
// the module's import paths resolve) and maps each import path to its export data file.
func exportFiles(dir string, f *ast.File) (map[string]string, error) {
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", im.Path.Value, err)
		}
		args = append(args, p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	exports := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if p, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[p] = file
		}
	}
	return exports, nil
}

// qualifiedName names a package-level object pkg.Name, and a method or field pkg.Type.Name; ok is false for
// other objects (locals, parameters, fields of unnamed types).
func qualifiedName(obj types.Object) (string, bool) {
	pkg := obj.Pkg().Name()
	if obj.Parent() == obj.Pkg().Scope() {
		return pkg + "." + obj.Name(), true
	}
	switch o := obj.(type) {
	case *types.Func:
		sig, ok := o.Type().(*types.Signature)
		if !ok || sig.Recv() == nil {
			return "", false
		}
		if n := namedOf(sig.Recv().Type()); n != nil {
			return pkg + "." + n.Obj().Name() + "." + o.Name(), true
		}
		return "", false // a method of an unnamed interface
	case *types.Var:
		if !o.IsField() {
			return "", false
		}
		if owner := fieldOwner(o); owner != "" {
			return pkg + "." + owner + "." + o.Name(), true
		}
	}
	return "", false
}

func namedOf(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := t.(*types.Named)
	return n
}

// fieldOwner finds the named struct type of the field's package that declares it.
func fieldOwner(field *types.Var) string {
	scope := field.Pkg().Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		st, ok := tn.Type().Underlying().(*types.Struct)
		if !ok {
			continue
		}
		for i := 0; i < st.NumFields(); i++ {
			if st.Field(i) == field {
				return name
			}
		}
	}
	return ""
}

// qualifiedUses counts the selectors pkg.Name whose pkg is an import of the module, without type information.
func qualifiedUses(f *ast.File, modPath string, typeErr error) usage {
	imports := map[string]string{} // local name → package name
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil || (p != modPath && !strings.HasPrefix(p, modPath+"/")) {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		local := name
		if im.Name != nil {
			local = im.Name.Name
		}
		imports[local] = name
	}
	names, pkgs := map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok {
			if pkg, ok := imports[id.Name]; ok && sel.Sel.IsExported() {
				names[pkg+"."+sel.Sel.Name] = true
				pkgs[pkg] = true
			}
		}
		return true
	})
	return usage{names: sortedKeys(names), packages: sortedKeys(pkgs), typeErr: typeErr}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func printUses(w io.Writer, u usage) {
	if !u.typed {
		fmt.Fprintf(w, "# not type-checked (%v): package-qualified names only\n", u.typeErr)
	}
	for _, n := range u.names {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintf(w, "total: %d names in %d packages (%s)\n", len(u.names), len(u.packages), strings.Join(u.packages, ", "))
}
