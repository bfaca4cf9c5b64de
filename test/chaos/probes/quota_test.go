package probes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

func TestQuotaLinks(t *testing.T) {
	root := t.TempDir()
	if links, err := QuotaLinks(root); err != nil || len(links) != 0 {
		t.Fatalf("a pool without a ledger: %v, %v; want none", links, err)
	}
	dir := filepath.Join(root, prjquota.StateDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"1001": "pvc-a", "1002": "pvc-b", "notes": "x"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	links, err := QuotaLinks(root)
	if err != nil || len(links) != 2 || links[1001] != "pvc-a" || links[1002] != "pvc-b" {
		t.Fatalf("links %v, %v; want 1001 pvc-a and 1002 pvc-b, the foreign entry left out", links, err)
	}
}

// Each way a deleted volume keeps its ID is a violation naming it; an ID
// handed to a new volume since, or released with its limit cleared, is not.
func TestQuotaReleased(t *testing.T) {
	limits := map[uint32]int64{1001: 0, 1002: 64 << 20, 1003: 0}
	limit := func(id uint32) (int64, error) { return limits[id], nil }
	deleted := map[string]uint32{"pvc-a": 1001, "pvc-b": 1003}

	// pvc-a's ID released, limit cleared; pvc-b's ID 1003 now held by pvc-c.
	links := map[uint32]string{1002: "pvc-live", 1003: "pvc-c"}
	if err := CheckQuotaReleased(links, deleted, limit); err != nil {
		t.Fatalf("everything released: %v", err)
	}

	var v *Violation
	leaked := map[uint32]string{1001: "pvc-a", 1002: "pvc-live"}
	if err := CheckQuotaReleased(leaked, deleted, nil); !errors.As(err, &v) || !strings.Contains(err.Error(), "volume pvc-a still linked to project 1001") {
		t.Fatalf("a leaked link: %v", err)
	}
	// The link gone but the kernel still limits the ID.
	limited := map[string]uint32{"pvc-a": 1002}
	if err := CheckQuotaReleased(map[uint32]string{}, limited, limit); !errors.As(err, &v) || !strings.Contains(err.Error(), "project 1002 of deleted volume pvc-a keeps a hard limit of 67108864 bytes") {
		t.Fatalf("a leaked limit: %v", err)
	}
	broken := func(uint32) (int64, error) { return 0, errors.New("quotactl: no such device") }
	if err := CheckQuotaReleased(map[uint32]string{}, limited, broken); err == nil || errors.As(err, &v) || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("a limit that cannot be read is an error, not a pass: %v", err)
	}
}

func TestSplit(t *testing.T) {
	if v, err := Split(nil); v != "" || err != nil {
		t.Fatalf("nil: %q, %v", v, err)
	}
	if v, err := Split(&Violation{"pool mount gone"}); v != "probe: pool mount gone" || err != nil {
		t.Fatalf("a violation: %q, %v; want its text and no error", v, err)
	}
	stop := errors.New("reading /proc: permission denied")
	if v, err := Split(stop); v != "" || !errors.Is(err, stop) {
		t.Fatalf("an error: %q, %v; want it back, no violation", v, err)
	}
}
