//go:build linux

package prjquota

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// On real XFS (no quota mount option needed: the project ID lives in the
// inode) the fsxattr ioctls set and read an ID and the inherit flag, and
// a file made afterwards inherits it. Probe says what the kernel offers.
func TestLinuxProjectOnXFS(t *testing.T) {
	mnt := testutil.LoopXFS(t, testutil.MinXFSBytes)
	dir := filepath.Join(mnt, "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := NewLinux()
	if err := k.SetProject(dir, 4_000_123); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "f")} {
		id, inherit, err := k.Project(p)
		if err != nil || id != 4_000_123 || inherit != (p == dir) {
			t.Errorf("%s: project %d inherit %v (%v); want 4000123, inherit on the directory only", p, id, inherit, err)
		}
	}
	pr, err := k.Probe(mnt)
	if err != nil || pr.FSType != "xfs" || pr.Enforcing {
		t.Fatalf("Probe of XFS mounted without prjquota = %+v, %v", pr, err)
	}
	t.Logf("XFS without prjquota, as the kernel answers: %v", Check(k, mnt))
	if err := Check(k, mnt); err == nil {
		t.Fatal("Check accepted XFS mounted without prjquota")
	}
}
