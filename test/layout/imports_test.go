package layout

import (
	"slices"
	"strings"
	"testing"
)

// TestPartsImportOnlyInternal: a package imports packages of its own part
// and of internal/, nothing else of hpp. Components never import each
// other (what two of them share belongs in internal/), internal/ imports no
// component, and test/ drives the components as binaries, over their
// sockets and the API, never through their packages. Each part was a Go
// module of its own until issue 29; this is the boundary those modules
// drew. internal/grpctest, a test helper that reaches gRPC (grpcTest in
// deps_test.go), is imported by tests only: no binary links it in.
func TestPartsImportOnlyInternal(t *testing.T) {
	checked := 0
	reported := map[string]bool{} // a package and its test variant import alike
	for name, p := range loadGraph(t) {
		from, ours := part(name)
		if !ours || strings.HasSuffix(base(name), ".test") {
			continue // another module's package, or go test's generated main
		}
		if from == "" {
			t.Errorf("%s is outside internal/, cmd/<component>/ and test/: put it in one of them (make unit counts tests per part)", name)
			continue
		}
		checked++
		if !strings.Contains(name, " [") && slices.Contains(p.imports, grpcTest) {
			// Not a test build: _test.go files are not in it.
			t.Errorf("%s imports %s, a test helper: import it from _test.go files only", name, base(grpcTest))
		}
		for _, imp := range p.imports {
			to, ours := part(imp)
			msg := base(name) + " imports " + base(imp)
			if ours && to != from && to != "internal" && !reported[msg] {
				reported[msg] = true
				t.Errorf("%s: %s", msg, allowedImports(from))
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list found no package of hpp: the test reads the wrong directory")
	}
}

func allowedImports(from string) string {
	if from == "internal" {
		return "internal/ imports no component and no test package"
	}
	return from + " may import only its own packages and internal/"
}
