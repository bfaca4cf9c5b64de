package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Make100kFiles makes dir (if need be) hold 100 directories of 1,000 empty
// files: the tree the stats benchmarks measure a walk of.
func Make100kFiles(tb testing.TB, dir string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		for j := range 1000 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d", j)), nil, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}
