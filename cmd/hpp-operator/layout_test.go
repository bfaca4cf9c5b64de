package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestControllersImportOneWay: the reconciler may use adopt and driverpv;
// the node-loss controller stands alone (driverpv only); adopt and driverpv
// use neither controller. An import the other way would tie a controller to
// another again. Tests are included, but for the reconciler's envtests,
// which run the node-loss controller beside it.
func TestControllersImportOneWay(t *testing.T) {
	const ctrl = "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/"
	allowed := map[string][]string{
		"hostpathprovisioner": {"adopt", "driverpv"},
		"nodeloss":            {"driverpv"},
		"adopt":               nil,
		"driverpv":            nil,
	}
	for dir, ok := range allowed {
		files, err := filepath.Glob(filepath.Join("controller", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in controller/%s: %v", dir, err)
		}
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				other, found := strings.CutPrefix(path, ctrl)
				if !found || other == dir || slices.Contains(ok, other) {
					continue
				}
				if dir == "hostpathprovisioner" && other == "nodeloss" && strings.HasSuffix(f, "_envtest_test.go") {
					continue
				}
				t.Errorf("%s imports %s: controller/%s may import only %v of the controller packages", f, path, dir, ok)
			}
		}
	}
}
