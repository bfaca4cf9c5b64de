package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPackagesImportOneWay: the CSI handlers and pool runtime (driver) and
// the process plumbing (serve) never import each other, tests included;
// run.go joins them. An import back would make the plumbing part of the
// driver again.
func TestPackagesImportOneWay(t *testing.T) {
	const mod = "github.com/hostpath-provisioner/hpp/cmd/hpp-csi/"
	for dir, banned := range map[string]string{"driver": mod + "serve", "serve": mod + "driver"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == banned {
					t.Errorf("%s imports %s: %s must not depend on it", f, banned, dir)
				}
			}
		}
	}
}
