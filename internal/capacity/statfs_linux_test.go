package capacity

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// TestStatfsMatchesDf compares with df, an independent reader of the same
// kernel figures. Size and inode totals do not move while other processes
// write, so they are compared exactly.
func TestStatfsMatchesDf(t *testing.T) {
	df, err := exec.LookPath("df")
	if err != nil {
		testutil.MissingPrerequisite(t, "df is not installed, nothing independent to compare with: %v", err)
	}
	dir := t.TempDir()
	st, err := Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(df, "-B1", "--output=size,itotal", dir).Output()
	if err != nil {
		t.Fatalf("df: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) != 2 {
		t.Fatalf("unexpected df output %q", out)
	}
	size, _ := strconv.ParseInt(fields[0], 10, 64)
	inodes, _ := strconv.ParseInt(fields[1], 10, 64)
	if st.TotalBytes != size || st.TotalInodes != inodes {
		t.Fatalf("Statfs = %+v; df says size %d, inodes %d", st, size, inodes)
	}
	if st.AvailableBytes < 0 || st.AvailableBytes > st.TotalBytes || st.UsedBytes > st.TotalBytes ||
		st.FreeInodes > st.TotalInodes || st.UsedInodes != st.TotalInodes-st.FreeInodes {
		t.Fatalf("inconsistent stats %+v", st)
	}
}

func TestStatfsMissingPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	_, err := Statfs(missing)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "statfs "+missing+": no such file or directory" {
		t.Fatalf("Statfs(missing) = %v", err)
	}
	_, err = SameFilesystem("/", missing)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "stat "+missing+": no such file or directory" {
		t.Fatalf("SameFilesystem(missing) = %v", err)
	}
}

func TestSameFilesystemUnprivileged(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if same, err := SameFilesystem(dir, sub); err != nil || !same {
		t.Fatalf("SameFilesystem(dir, dir/sub) = %v, %v", same, err)
	}
	if same, err := SameFilesystem("/", "/"); err != nil || !same {
		t.Fatalf("SameFilesystem(/, /) = %v, %v", same, err)
	}
	// /proc is always its own filesystem on Linux.
	if same, err := SameFilesystem(dir, "/proc"); err != nil || same {
		t.Fatalf("SameFilesystem(tmp, /proc) = %v, %v", same, err)
	}
}

// TestTmpfsNode mounts a tmpfs of a known size, so every figure is known.
func TestTmpfsNode(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "needs root to mount a tmpfs (euid %d)", os.Geteuid())
	}
	const size = 64 << 20
	// Under "/" itself, so the directory is certainly on the root filesystem
	// before the mount and certainly not after.
	dir, err := os.MkdirTemp("/", "hpp-capacity-test-")
	if err != nil {
		testutil.MissingPrerequisite(t, "cannot make a directory under / (read-only root?): %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	if same, err := SameFilesystem(dir, "/"); err != nil || !same {
		t.Fatalf("before mount: SameFilesystem(%s, /) = %v, %v", dir, same, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,mode=0755"); err != nil {
		testutil.MissingPrerequisite(t, "cannot mount tmpfs (no CAP_SYS_ADMIN in this container?): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})

	before, err := Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if before.TotalBytes != size || before.AvailableBytes != size || before.UsedBytes != 0 {
		t.Fatalf("fresh 64 MiB tmpfs: %+v", before)
	}
	if same, err := SameFilesystem(dir, "/"); err != nil || same {
		t.Fatalf("SameFilesystem(tmpfs, /) = %v, %v", same, err)
	}
	if same, err := SameFilesystem(dir, filepath.Dir(dir)); err != nil || same {
		t.Fatalf("SameFilesystem(tmpfs, its parent) = %v, %v", same, err)
	}

	// Real bytes, not a sparse file: tmpfs charges pages that hold data.
	const written = 8 << 20
	if err := os.WriteFile(filepath.Join(dir, "data"), bytes.Repeat([]byte{0xa5}, written), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if drop := before.AvailableBytes - after.AvailableBytes; drop != written || after.UsedBytes != written {
		t.Fatalf("after writing 8 MiB: available dropped by %d, used %d (%+v)", drop, after.UsedBytes, after)
	}
	if after.UsedInodes != before.UsedInodes+1 || after.FreeInodes != before.FreeInodes-1 {
		t.Fatalf("after creating one file: inodes %+v -> %+v", before, after)
	}
	// 25% of 64 MiB is 16 MiB; 56 MiB are left, so 40 MiB may be offered.
	if got := Offered(after, Headroom{Bytes: 1 << 20, Percent: 25}); got != 40<<20 {
		t.Fatalf("Offered = %d, want %d", got, 40<<20)
	}
}
