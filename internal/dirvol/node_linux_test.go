package dirvol_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// Node tests (root): the behaviour and crash suites on the filesystems pools
// really live on, created by the test.

func TestNodeTmpfs(t *testing.T) {
	base := testutil.TmpfsDir(t, 256<<20)
	requireFSType(t, base, unix.TMPFS_MAGIC, "tmpfs")
	t.Run("Behaviour", func(t *testing.T) { inRecordForms(t, filepath.Join(base, "behaviour"), behaviourSuite) })
	t.Run("Crash", func(t *testing.T) { inRecordForms(t, filepath.Join(base, "crash"), crashSuite) })
}

func TestNodeXFS(t *testing.T) {
	base := testutil.LoopXFS(t, 512<<20)
	requireFSType(t, base, unix.XFS_SUPER_MAGIC, "xfs")
	t.Run("Behaviour", func(t *testing.T) { inRecordForms(t, filepath.Join(base, "behaviour"), behaviourSuite) })
	t.Run("Crash", func(t *testing.T) { inRecordForms(t, filepath.Join(base, "crash"), crashSuite) })
}

// requireFSType proves the suite runs where it claims to.
func requireFSType(t *testing.T, dir string, magic int64, name string) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if int64(st.Type) != magic {
		t.Fatalf("%s is not %s (statfs type %#x)", dir, name, st.Type)
	}
}
