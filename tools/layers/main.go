// Command layers checks that the module's imports point one way: every package belongs to a layer of
// the list below, lowest first, and may import only packages of its own layer or lower ones; no two
// folders import each other, directly or through others. Tests (in-package and _test packages) may also
// import the library layers above their own (up to dlq, outbox and topics: a consumer test may run the
// middleware chain) and the test support (internal/testenv), never cmd, examples or tools from below.
//
// Run it from the module root: `go run ./tools/layers` (`make layers`; `make test` runs it first). It
// reads the packages with `go list -json ./...`, prints each violation and exits 1 when there is one.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// module is the module path that prefixes every package of this repository.
const module = "github.com/rmqguard/rmqguard"

// testSupport is the folder any test may import, whatever its layer.
const testSupport = "internal/testenv"

// testCeiling is a folder of the highest layer the tests of a lower layer may import.
const testCeiling = "topics"

// layers lists the folders of each layer, lowest first; a folder holds its sub-packages (tools holds
// tools/chaos/cmd/chaos). Read from the code: consumer imports retry, internal/rmq and its neighbours
// (body, letter, batch, pending), metrics, internal/collect and internal/txproto (the dedup stores' transaction
// protocol) import consumer, dedup imports collect, txproto and internal/migrate, middleware
// imports dedup and metrics, dlq, outbox and topics use consumer, dedup and internal/rmq (dlq also
// internal/dlqtool, the operator's DLQ tooling, which uses topics), internal/console (the operator's web page)
// sits on dlqtool and outboxadmin, and internal/testenv serves the tests of all.
var layers = [][]string{
	{"internal/rmq", "internal/body", "internal/letter", "internal/batch", "internal/causelabel", "internal/pending", "internal/scrape", "internal/mysqlerr", "internal/dedupsql", "internal/outboxsql", "internal/migrate"},
	{"retry"},
	{"consumer"},
	{"metrics", "internal/collect", "internal/dupcause", "internal/txproto"},
	{"dedup"},
	{"internal/testenv"},
	{"middleware"},
	{"dlq", "outbox", "topics", "internal/outboxadmin", "internal/dlqtool"},
	{"internal/console"},
	{"cmd", "examples"},
	{"tools", "e2e"},
}

// pkg is what `go list -json` says of one package that this check reads.
type pkg struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

func main() {
	pkgs, err := list()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers:", err)
		os.Exit(2)
	}
	problems := check(pkgs)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("layers: %d problem(s); the layers, lowest first, are in tools/layers/main.go\n", len(problems))
		os.Exit(1)
	}
	fmt.Printf("layers: %d packages, imports point one way (%s)\n", len(pkgs), order())
}

// list runs `go list -json ./...` and decodes its stream of packages.
func list() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, errOut.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// order renders the layers as "a < b, c < …".
func order() string {
	parts := make([]string, len(layers))
	for i, l := range layers {
		parts[i] = strings.Join(l, ", ")
	}
	return strings.Join(parts, " < ")
}

// folder returns the declared folder holding the module-relative package path rel, and its layer index;
// ok is false when no folder of layers holds it.
func folder(rel string) (name string, layer int, ok bool) {
	best := -1
	for i, l := range layers {
		for _, f := range l {
			if (rel == f || strings.HasPrefix(rel, f+"/")) && len(f) > len(name) {
				name, best = f, i
			}
		}
	}
	return name, best, best >= 0
}

// check returns one line per import that points to a higher layer, per package of no declared folder,
// and per cycle between folders.
func check(pkgs []pkg) []string {
	var problems []string
	edges := map[string]map[string]bool{} // folder → folders it imports (tests excluded)
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		from, layer, ok := folder(rel)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: in no layer (add its folder to tools/layers)", rel))
			continue
		}
		imports := map[string]bool{}
		for _, imp := range p.Imports {
			imports[imp] = false
		}
		for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
			if _, seen := imports[imp]; !seen {
				imports[imp] = true
			}
		}
		for _, imp := range sorted(imports) {
			test := imports[imp]
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			irel := strings.TrimPrefix(imp, module+"/")
			to, ilayer, ok := folder(irel)
			if !ok || to == from && !test {
				continue // an undeclared package is reported as itself
			}
			if !test {
				if edges[from] == nil {
					edges[from] = map[string]bool{}
				}
				edges[from][to] = true
			}
			ceiling := layer
			if test {
				_, top, _ := folder(testCeiling)
				ceiling = max(layer, top)
			}
			if ilayer > ceiling && !(test && to == testSupport) {
				kind := "imports"
				if test {
					kind = "tests import"
				}
				problems = append(problems, fmt.Sprintf("%s (%s) %s %s (%s): a higher layer", rel, from, kind, irel, to))
			}
		}
	}
	return append(problems, cycles(edges)...)
}

// cycles returns one line per cycle between folders in edges (each found once, from its least folder).
func cycles(edges map[string]map[string]bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, start := range sorted(edges) {
		var walk func(at string, path []string)
		walk = func(at string, path []string) {
			for _, next := range sorted(edges[at]) {
				switch {
				case next == start:
					key := strings.Join(path, " → ")
					if !seen[key] {
						seen[key] = true
						out = append(out, "folders form a cycle: "+key+" → "+start)
					}
				case next > start && !contains(path, next):
					walk(next, append(path, next))
				}
			}
		}
		walk(start, []string{start})
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
