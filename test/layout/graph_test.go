package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// module is hpp's one Go module; every package of the product and of its
// tests is below it.
const module = "github.com/hostpath-provisioner/hpp"

// pkg is one package of `go list -deps -test`: a test build of a package
// is a node of its own ("p [p.test]"), so the imports of _test.go files are
// held to the same rules as the package's.
type pkg struct {
	module  string   // the module that provides it, "" for the standard library
	imports []string // as go list names them, test variants included
}

// loadGraph lists every package hpp builds, tests included, and all they
// import, from the repository root. The rules below read real builds, not
// parsed files, so build tags and test variants count as the compiler sees
// them.
func loadGraph(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-test",
		"-f", "{{.ImportPath}}\t{{with .Module}}{{.Path}}{{end}}\t{{join .Imports \" \"}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string]pkg{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		graph[f[0]] = pkg{module: f[1], imports: strings.Fields(f[2])}
	}
	return graph
}

// base drops the test variant from a go list name: "p [q.test]" is p.
func base(name string) string {
	p, _, _ := strings.Cut(name, " ")
	return p
}

// part says which part of the repository a package of hpp belongs to:
// "internal", "cmd/<component>" or "test"; "" for a package elsewhere, and
// ok false for a package that is not hpp's.
func part(path string) (string, bool) {
	rel, found := strings.CutPrefix(base(path), module+"/")
	if !found {
		return "", base(path) == module
	}
	first, rest, _ := strings.Cut(rel, "/")
	switch first {
	case "internal", "test":
		return first, true
	case "cmd":
		component, _, _ := strings.Cut(rest, "/")
		return "cmd/" + strings.TrimSuffix(component, ".test"), true
	}
	return "", true
}
