package main

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// TestControllersImportOneWay: the reconciler may use adopt and driverpv;
// the node-loss controller stands alone (driverpv only); adopt and driverpv
// use neither controller. An import the other way would tie a controller to
// another again. Tests are held to it too, but for the reconciler's
// envtests (package hostpathprovisioner_test), which run the node-loss
// controller beside it.
func TestControllersImportOneWay(t *testing.T) {
	const ctrl = "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/"
	allowed := map[string][]string{
		"hostpathprovisioner": {"adopt", "driverpv"},
		"nodeloss":            {"driverpv"},
		"adopt":               nil,
		"driverpv":            nil,
		"peercerts":           nil,
	}
	for dir, ok := range allowed {
		pkg, err := build.ImportDir("controller/"+dir, 0)
		if err != nil {
			t.Fatalf("controller/%s: %v", dir, err)
		}
		external := pkg.XTestImports
		if dir == "hostpathprovisioner" {
			external = slices.DeleteFunc(slices.Clone(external), func(p string) bool { return p == ctrl+"nodeloss" })
		}
		for _, path := range slices.Concat(pkg.Imports, pkg.TestImports, external) {
			if other, found := strings.CutPrefix(path, ctrl); found && other != dir && !slices.Contains(ok, other) {
				t.Errorf("controller/%s imports %s: it may import only %v of the controller packages", dir, path, ok)
			}
		}
	}
}
