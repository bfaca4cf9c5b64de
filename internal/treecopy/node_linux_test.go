package treecopy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// Node tests (root): real trees copied on tmpfs (no reflink: the copy
// path) and on XFS with reflink (loop device), checked entry by entry.

func TestNodeTmpfsCopy(t *testing.T) {
	base := testutil.TmpfsDir(t, 256<<20)
	ok, err := ProbeReflink(base)
	if err != nil || ok {
		t.Fatalf("reflink probe on tmpfs = %v, %v; want false, nil", ok, err)
	}
	copySuite(t, base, Reflink, false) // asks for reflink, must fall back
}

func TestNodeXFSReflink(t *testing.T) {
	base := testutil.LoopXFS(t, 512<<20)
	ok, err := ProbeReflink(base)
	if err != nil || !ok {
		t.Fatalf("reflink probe on XFS = %v, %v; want true (mkfs.xfs defaults to reflink=1)", ok, err)
	}
	t.Run("reflink", func(t *testing.T) { copySuite(t, base, Reflink, true) })
	t.Run("copy", func(t *testing.T) { copySuite(t, base, Copy, false) })
}

// copySuite builds a tree with every kind of entry in base, copies it and
// checks content, metadata, holes and links; shared says whether the
// copy's data must share extents with the source (reflink).
func copySuite(t *testing.T, base string, mode Mode, shared bool) {
	noatime(t, base)
	src := filepath.Join(base, "src-"+mode.String())
	dst := filepath.Join(base, "dst-"+mode.String())
	buildTree(t, src)
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	want := capture(t, src)
	stats, err := Tree(context.Background(), src, dst, mode)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Files != 3 || stats.HardLinks != 1 || stats.Symlinks != 2 || stats.Nodes != 1 || stats.Dirs != 2 {
		t.Fatalf("stats = %+v, want 3 files, 1 hard link, 2 symlinks, 1 node, 2 dirs", stats)
	}
	if shared && stats.Reflinked != 3 || !shared && stats.Reflinked != 0 {
		t.Fatalf("reflinked %d files, want all 3 = %v", stats.Reflinked, shared)
	}
	sameTree(t, want, dst)
	// Holes stay holes: 64 MiB apparent, a few KiB allocated.
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20 || st.Blocks*512 > 1<<20 {
		t.Fatalf("sparse copy: size %d, allocated %d bytes; want 64 MiB with its holes kept", st.Size, st.Blocks*512)
	}
	if got := sharedExtents(t, filepath.Join(dst, "dir", "data")); got != shared {
		t.Fatalf("copy of dir/data shares extents = %v, want %v", got, shared)
	}
}

func buildTree(t *testing.T, root string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "dir", "data"), bytes.Repeat([]byte("hpp data\n"), 100000), 0o640))
	must(os.Link(filepath.Join(root, "dir", "data"), filepath.Join(root, "hardlink")))
	must(os.WriteFile(filepath.Join(root, "setgid"), []byte("x"), 0o644))
	must(os.Chmod(filepath.Join(root, "setgid"), 0o2755|os.ModeSetgid))
	f, err := os.Create(filepath.Join(root, "sparse"))
	must(err)
	_, err = f.WriteAt([]byte("head"), 0)
	must(err)
	_, err = f.WriteAt([]byte("middle"), 32<<20)
	must(err)
	must(f.Truncate(64 << 20))
	must(f.Close())
	must(os.Symlink("dir/data", filepath.Join(root, "link")))
	must(os.Symlink("/nonexistent/target", filepath.Join(root, "dangling")))
	must(unix.Mkfifo(filepath.Join(root, "dir", "sub", "fifo"), 0o600))
	must(os.Lchown(filepath.Join(root, "dir"), 1000, 2000))
	must(os.Lchown(filepath.Join(root, "link"), 1001, 2001))
	must(os.Lchown(filepath.Join(root, "dir", "data"), 1002, 2002))
	must(os.Chown(root, 107, 107))
	must(os.Chmod(root, 0o750))
	for _, p := range []string{filepath.Join(root, "dir", "data"), filepath.Join(root, "dir"), root} {
		must(unix.Setxattr(p, "user.hpp", []byte("value of "+filepath.Base(p)), 0))
		must(unix.Setxattr(p, "trusted.hpp", []byte("trusted"), 0))
	}
	// An SELinux label where the kernel keeps one (tmpfs and XFS do, as
	// security.* xattrs, even without an SELinux policy loaded).
	if err := unix.Setxattr(filepath.Join(root, "dir", "data"), "security.selinux", []byte("system_u:object_r:container_file_t:s0\x00"), 0); err != nil {
		t.Logf("no security.selinux on this kernel (%v): labels are checked as the xattrs there are", err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	walk(t, root, func(p string) {
		ts := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.Add(time.Hour).UnixNano())}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
	})
}

// walk calls fn on every entry below root, children before their
// directory (so a directory's times are set last), and on root.
func walk(t *testing.T, root string, fn func(string)) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if e.IsDir() {
			walk(t, p, fn)
			continue
		}
		fn(p)
	}
	fn(root)
}

// entryInfo is what a copy must keep of one entry.
type entryInfo struct {
	mode, uid, gid, nlink uint32
	size                  int64
	atime, mtime          unix.Timespec
	xattrs, content, link string
	ino                   uint64
}

// capture records every entry below root (and root) by relative path.
// Taken before the copy: reading a file or a link moves its atime, which
// the copy keeps as it was.
func capture(t *testing.T, root string) map[string]entryInfo {
	t.Helper()
	out := map[string]entryInfo{}
	walk(t, root, func(p string) {
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		e := entryInfo{mode: st.Mode, uid: st.Uid, gid: st.Gid, nlink: uint32(st.Nlink), size: st.Size,
			atime: st.Atim, mtime: st.Mtim, xattrs: fmt.Sprint(xattrs(t, p)), ino: st.Ino}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, _ := os.ReadFile(p)
			e.content = fmt.Sprintf("sha256:%x", sha256.Sum256(data))
		case unix.S_IFLNK:
			e.link, _ = os.Readlink(p)
		}
		out[rel] = e
	})
	return out
}

// sameTree compares the copy b with what a held before the copy: type,
// mode, owner, times, xattrs, content or link target, and hard links.
func sameTree(t *testing.T, want map[string]entryInfo, b string) {
	t.Helper()
	got := capture(t, b)
	if len(got) != len(want) {
		t.Fatalf("copy has %d entries, want %d", len(got), len(want))
	}
	for rel, w := range want {
		g, ok := got[rel]
		if !ok {
			t.Fatalf("%s: missing in the copy", rel)
		}
		g.ino, w.ino = 0, 0
		if g != w {
			t.Fatalf("%s:\n got %+v\nwant %+v", rel, g, w)
		}
	}
	if got["hardlink"].ino != got[filepath.Join("dir", "data")].ino {
		t.Fatal("hardlink and dir/data are different inodes in the copy")
	}
}

func xattrs(t *testing.T, p string) map[string]string {
	t.Helper()
	names, err := listXattrs(p)
	if err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		v, err := getXattr(p, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(v)
	}
	return out
}

// fiemap is struct fiemap with room for extents (linux/fiemap.h).
type fiemap struct {
	start, length             uint64
	flags, mappedExtents, cnt uint32
	reserved                  uint32
	extents                   [32]fiemapExtent
}

type fiemapExtent struct {
	logical, physical, length uint64
	reserved64                [2]uint64
	flags                     uint32
	reserved32                [3]uint32
}

const (
	fsIocFiemap        = 0xC020660B
	fiemapFlagSync     = 0x1
	fiemapExtentShared = 0x2000
)

// sharedExtents reports whether any extent of p is shared with another
// file: the proof that a reflink was made, whatever the time it took.
func sharedExtents(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fm := fiemap{length: ^uint64(0), flags: fiemapFlagSync, cnt: uint32(len(fiemap{}.extents))}
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&fm)))
	if errno == syscall.EOPNOTSUPP {
		return false // tmpfs: no extents, so nothing shared
	}
	if errno != 0 {
		t.Fatalf("FIEMAP %s: %v", p, errno)
	}
	for i := uint32(0); i < fm.mappedExtents && i < fm.cnt; i++ {
		if fm.extents[i].flags&fiemapExtentShared != 0 {
			return true
		}
	}
	return false
}

// noatime bind-mounts dir on itself without atime updates, so that reading
// a tree (to copy it, to check it) leaves the atimes the copy must keep.
func noatime(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount bind %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOATIME, ""); err != nil {
		t.Fatalf("remount %s noatime: %v", dir, err)
	}
}
