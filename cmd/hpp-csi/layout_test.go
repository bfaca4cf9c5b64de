package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPackagesImportOneWay: hpp-csi's packages import one way, tests
// included, and run.go joins them:
//
//	handlers -> pools -> host
//
// The CSI handlers ask the pool runtime and never reach the OS adapters
// themselves (a handler that mounts or stats on its own is a second pool
// runtime); the pool runtime never imports the handlers (it would speak
// gRPC again, and each would call back into the other); the adapters know
// neither. The process plumbing (serve) and the three never import each
// other: an import back would make the plumbing part of the driver again.
func TestPackagesImportOneWay(t *testing.T) {
	const mod = "github.com/hostpath-provisioner/hpp/cmd/hpp-csi/"
	banned := map[string][]string{
		"handlers": {"host", "serve"},
		"pools":    {"handlers", "serve", "remote"},
		"host":     {"pools", "handlers", "serve"},
		"serve":    {"handlers", "pools", "host"},
		// Cross-node clones sit beside the runtime, never above the
		// handlers: the runtime asks them through its RemoteSources.
		"remote": {"handlers", "serve"},
	}
	for dir, imports := range banned {
		files := goFilesUnder(t, dir)
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range imports {
					if path == mod+b || strings.HasPrefix(path, mod+b+"/") {
						t.Errorf("%s imports %s: %s must not depend on %s", f, path, dir, b)
					}
				}
			}
		}
	}
}

// goFilesUnder lists the Go files of dir and of the packages below it
// (pools/poolstest is the pool runtime's too).
func goFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
