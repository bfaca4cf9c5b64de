package probes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLeftovers(t *testing.T) {
	pool := t.TempDir()
	gone := filepath.Join(pool, "pvc-gone")
	staging := filepath.Join(pool, ".hpp-staging")
	if err := os.Mkdir(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckLeftovers([]string{gone}, []string{staging, filepath.Join(pool, "no-trash")}); err != nil {
		t.Fatalf("nothing left, yet: %v", err)
	}
	// A leaked directory, then a staging entry: each is a violation naming it.
	leaked := filepath.Join(pool, "pvc-leaked")
	if err := os.Mkdir(leaked, 0o755); err != nil {
		t.Fatal(err)
	}
	var v *Violation
	if err := CheckLeftovers([]string{gone, leaked}, nil); !errors.As(err, &v) || !strings.Contains(err.Error(), leaked) {
		t.Fatalf("leaked directory: %v", err)
	}
	if err := os.Mkdir(filepath.Join(staging, "create-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckLeftovers(nil, []string{staging}); !errors.As(err, &v) || !strings.Contains(err.Error(), "create-1") {
		t.Fatalf("staging entry: %v", err)
	}
}

func TestMessages(t *testing.T) {
	for msg, bare := range map[string]bool{
		"rpc error: code = Internal desc = ":                                 true,
		"failed to provision volume with StorageClass \"x\": internal error": true,
		"internal error": true,
		"rpc error: code = Internal desc = creating volume pvc-1: mkdir: no space left":  false,
		"rpc error: code = Unavailable desc = copying from node n1: connection refused":  false,
		"failed to provision volume: internal error while reading pool local: I/O error": false,
	} {
		err := CheckMessage("event", msg)
		var v *Violation
		if got := errors.As(err, &v); got != bare {
			t.Errorf("%q: violation %v, want %v", msg, got, bare)
		}
	}
}
