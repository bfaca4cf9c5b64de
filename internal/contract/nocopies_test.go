package contract

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goAllowed lists the places that write a contract value on purpose: the
// file (from the repository's root), the value and why. Everything else
// takes the names from this package.
var goAllowed = []struct{ path, value, reason string }{
	{"cmd/hpp-csi/options_test.go", DriverName,
		"TestUpstreamArgumentList parses the KubeVirt DaemonSet's argument list as upstream writes it"},
	{"test/csinode/upstream_test.go", DriverName,
		"runs hpp-csi with the KubeVirt DaemonSet's argument list as upstream writes it"},
	{"cmd/hpp-migrate/migrate/plan.go", ParamStoragePool,
		"a struct tag (Go builds none from a constant): the plan's JSON field, named as the parameter"},
}

// allowedGo reports whether goAllowed lists value in the file rel.
func allowedGo(rel, value string) bool {
	for _, a := range goAllowed {
		if a.path == rel && a.value == value {
			return true
		}
	}
	return false
}

// TestNoCopies walks every .go file of the repository (tests and fixtures
// of upstream's objects included: they take the names from here too, and
// TestUpstreamValues is where upstream's spelling is asserted) and fails on
// a string that contains one of the contract's values as a whole name
// ("--key=" + the topology key, a label selector, a socket path under the
// driver's name): a copy that could drift from this package without any
// test but an end-to-end one noticing. A string is a literal or a
// concatenation the file alone folds to a constant (literals, and
// constants of the same file declared from literals); one built from a
// constant of another package or at run time is not searched.
func TestNoCopies(t *testing.T) {
	root := repoRoot(t)
	values := guarded()
	self := filepath.Join(root, "internal", "contract")
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || (path != root && skipDir(d.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, s := range foldedStrings(f) {
			for _, o := range find(s.value, values) {
				if allowedGo(filepath.ToSlash(rel), o.value) {
					continue
				}
				found = append(found, rel+":"+strconv.Itoa(fset.Position(s.pos).Line)+": "+
					strconv.Quote(s.value)+" holds "+strconv.Quote(o.value)+" (use contract."+values[o.value]+")")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}
