package snapshot_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/snapshot"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// Node tests (root): a snapshot or a clone whose process is killed in the
// middle of its copy leaves nothing that looks like a snapshot or a
// volume, and the next start removes what it left; a clone of a 1 GiB
// volume on XFS shares its data (reflink) instead of copying it.

const childEnv = "HPP_SNAPSHOT_TEST_CHILD"

// TestMain lets the test binary play the process that gets killed.
func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "snapshot":
		childSnapshot()
	case "clone":
		childClone()
	}
	os.Exit(m.Run())
}

func childSnapshot() {
	s, err := snapshot.Open(os.Getenv("AREA"), "node", treecopy.Copy, nil)
	if err == nil {
		_, _, err = s.Create(context.Background(), "snap-1", snapshot.Source{VolumeID: "pvc-src", Dir: os.Getenv("SRC")})
	}
	exitWith(err)
}

func childClone() {
	st, err := dirvol.Open(os.Getenv("POOL"), dirvol.Options{NodeID: "node"})
	if err == nil {
		fill := func(dir string) error {
			_, err := treecopy.Tree(context.Background(), os.Getenv("SRC"), dir, treecopy.Copy)
			return err
		}
		_, _, err = st.Create(context.Background(), "pvc-clone", dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, Fill: fill})
	}
	exitWith(err)
}

func exitWith(err error) {
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	os.Exit(0)
}

// bigSource makes a volume whose copy takes long enough to be caught in
// the middle: one 512 MiB file of data.
func bigSource(t *testing.T, dir string) string { return volumeWithDisk(t, dir, 512<<20) }

// volumeWithDisk makes dir/pvc-src holding disk.img of size bytes of data
// (no holes: every byte must be copied or shared).
func volumeWithDisk(t *testing.T, dir string, size int) string {
	t.Helper()
	src := filepath.Join(dir, "pvc-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(src, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for range size / len(buf) {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return src
}

// killMidCopy runs the child and SIGKILLs it once a partial copy of
// disk.img shows up anywhere below staging (the copy is under way and not
// finished), and returns that partial file.
func killMidCopy(t *testing.T, mode, staging string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case err := <-exited:
			t.Fatalf("the %s finished (%v) before it could be killed mid-copy", mode, err)
		default:
		}
		if p := partial(staging); p != "" {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited
			return p
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// partial finds a copy of disk.img in staging that holds some of its data
// but not all. By the space it takes, not its size: treecopy gives a file
// its size before it writes the data.
func partial(staging string) string {
	found := ""
	_ = filepath.WalkDir(staging, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "disk.img" {
			if fi, err := d.Info(); err == nil {
				if held := fi.Sys().(*syscall.Stat_t).Blocks * 512; held > 0 && held < 512<<20 {
					found = p
				}
			}
		}
		return nil
	})
	return found
}

func TestNodeSnapshotKilledMidCopyLeavesNothing(t *testing.T) {
	base := testutil.TmpfsDir(t, 2<<30)
	src := bigSource(t, base)
	area := filepath.Join(base, "snapshots")
	left := killMidCopy(t, "snapshot", filepath.Join(area, snapshot.StagingDir), "AREA="+area, "SRC="+src)
	t.Logf("killed with a partial copy at %s", left)

	s, err := snapshot.Open(area, "node", treecopy.Copy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), "snap-1"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("Get after the kill = %v, want ErrNotFound", err)
	}
	if list, err := s.List(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("List after the kill = %v, %v; want none", list, err)
	}
	n, err := s.Recover(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want the one unfinished snapshot removed", n, err)
	}
	requireEmpty(t, filepath.Join(area, snapshot.StagingDir))
	// The retry then takes the snapshot whole.
	snap, created, err := s.Create(context.Background(), "snap-1", snapshot.Source{VolumeID: "pvc-src", Dir: src, CapacityBytes: 1 << 30})
	if err != nil || !created || snap.SizeBytes != 1<<30 {
		t.Fatalf("retry = %+v, %v, %v", snap, created, err)
	}
	if fi, err := os.Stat(filepath.Join(snap.Data, "disk.img")); err != nil || fi.Size() != 512<<20 {
		t.Fatalf("snapshot data: %v, %v", fi, err)
	}
}

func TestNodeCloneKilledMidCopyLeavesNothing(t *testing.T) {
	base := testutil.TmpfsDir(t, 2<<30)
	src := bigSource(t, base)
	poolDir := filepath.Join(base, "csi")
	killMidCopy(t, "clone", filepath.Join(poolDir, dirvol.StagingDir), "POOL="+poolDir, "SRC="+src)

	st, err := dirvol.Open(poolDir, dirvol.Options{NodeID: "node"})
	if err != nil {
		t.Fatal(err)
	}
	if vols, err := st.List(context.Background()); err != nil || len(vols) != 0 {
		t.Fatalf("List after the kill = %v, %v; want no volume", vols, err)
	}
	rep, err := st.Recover(context.Background())
	if err != nil || rep.RemovedStaging == 0 {
		t.Fatalf("Recover = %+v, %v; want the unfinished clone removed", rep, err)
	}
	requireEmpty(t, filepath.Join(poolDir, dirvol.StagingDir))
}

func requireEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("%s holds %v (%v), want nothing", dir, entries, err)
	}
}

// A 1 GiB volume on XFS is cloned by sharing its extents: the clone's
// data is proven shared (FIEMAP), which is what makes its time
// independent of the size; the time is logged, not asserted.
func TestNodeXFSClone1GiBIsReflinked(t *testing.T) {
	base := testutil.LoopXFS(t, 3<<30)
	ok, err := treecopy.ProbeReflink(base)
	if err != nil || !ok {
		t.Fatalf("reflink probe on XFS = %v, %v", ok, err)
	}
	src := volumeWithDisk(t, base, 1<<30)
	dst := filepath.Join(base, "pvc-clone")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	// A reflink first writes back the source's dirty pages; a volume's
	// data is normally on disk already, so it is here too.
	if err := treecopy.Syncfs(src); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stats, err := treecopy.Tree(context.Background(), src, dst, treecopy.Reflink)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if stats.Reflinked != 1 || stats.Bytes != 1<<30 {
		t.Fatalf("stats = %+v, want the 1 GiB file reflinked", stats)
	}
	shared, extents := fiemapShared(t, filepath.Join(dst, "disk.img"))
	if !shared {
		t.Fatalf("the clone's %d extents share nothing with the source: it was copied", extents)
	}
	t.Logf("1 GiB clone by reflink took %v (%d extents, shared)", took, extents)
}

// fiemapShared reports whether every mapped extent of p is shared.
func fiemapShared(t *testing.T, p string) (bool, int) {
	t.Helper()
	type extent struct {
		logical, physical, length uint64
		reserved64                [2]uint64
		flags                     uint32
		reserved32                [3]uint32
	}
	var fm struct {
		start, length             uint64
		flags, mapped, count, res uint32
		extents                   [256]extent
	}
	fm.length, fm.flags, fm.count = ^uint64(0), 1 /* FIEMAP_FLAG_SYNC */, 256
	file, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, file.Fd(), 0xC020660B /* FS_IOC_FIEMAP */, uintptr(unsafe.Pointer(&fm))); errno != 0 {
		t.Fatalf("FIEMAP %s: %v", p, errno)
	}
	if fm.mapped == 0 {
		return false, 0
	}
	for i := uint32(0); i < fm.mapped && i < fm.count; i++ {
		if fm.extents[i].flags&0x2000 /* FIEMAP_EXTENT_SHARED */ == 0 {
			return false, int(fm.mapped)
		}
	}
	return true, int(fm.mapped)
}
