package treecopy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
	checkCounts(t, stats)
	if shared && stats.Reflinked != 4 || !shared && stats.Reflinked != 0 {
		t.Fatalf("reflinked %d files, want all 4 = %v", stats.Reflinked, shared)
	}
	if !shared {
		checkDataBytes(t, src, stats.DataBytes)
	}
	sameTree(t, want, dst)
	sameHoles(t, src, dst)
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

// checkCounts checks the stats of a copy of buildTree's tree.
func checkCounts(t *testing.T, stats Stats) {
	t.Helper()
	if stats.Files != 4 || stats.HardLinks != 1 || stats.Symlinks != 2 || stats.Nodes != 1 || stats.Dirs != 2 ||
		stats.Bytes != 100000*9+1+64<<20+imageSize {
		t.Fatalf("stats = %+v, want 4 files of %d bytes, 1 hard link, 2 symlinks, 1 node, 2 dirs",
			stats, 100000*9+1+64<<20+imageSize)
	}
}

// fatalOnError is the tree builders' check of each step: the function it
// returns fails t on an error, so that a builder reads as its steps.
func fatalOnError(t testing.TB) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// buildTree makes, below root, an entry of every kind with owners, modes,
// xattrs and old times, and two sparse files: "sparse" (64 MiB, a few
// bytes written) and "image" (buildImage).
func buildTree(t testing.TB, root string) {
	t.Helper()
	must := fatalOnError(t)
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
	buildImage(t, filepath.Join(root, "image"))
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

// imageSize is the apparent size of buildImage's file.
const imageSize = 1 << 30

// buildImage writes a sparse disk image like a VM's: imageSize apparent,
// 48 extents of random data (4 KiB to 1 MiB, some of them unaligned, one
// at the very end) scattered over it, holes everywhere else.
func buildImage(t testing.TB, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(imageSize); err != nil {
		t.Fatal(err)
	}
	src := rand.NewChaCha8([32]byte{'h', 'p', 'p'})
	rng := rand.New(src)
	buf := make([]byte, 1<<20)
	for i := range 48 {
		n := (1 + rng.Int64N(256)) << 12
		off := rng.Int64N(imageSize/4096-256) << 12
		switch {
		case i == 0:
			off = imageSize - n // data up to the end: no trailing hole
		case i%8 == 1:
			off, n = off+100, n-300 // unaligned both ends
		}
		b := buf[:n]
		_, _ = src.Read(b) // never fails; a zero page in it is a 2^-32768 chance
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// walk calls fn on every entry below root, children before their
// directory (so a directory's times are set last), and on root.
func walk(t testing.TB, root string, fn func(string)) {
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
func capture(t testing.TB, root string) map[string]entryInfo {
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
			e.content = digest(t, p)
		case unix.S_IFLNK:
			e.link, _ = os.Readlink(p)
		}
		out[rel] = e
	})
	return out
}

// sameTree compares the copy b with what a held before the copy: type,
// mode, owner, times, xattrs, content or link target, and hard links.
func sameTree(t testing.TB, want map[string]entryInfo, b string) {
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

func xattrs(t testing.TB, p string) map[string]string {
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

// digest is a sha256 of p's content that reads only its data ranges
// (SEEK_DATA/SEEK_HOLE, asked here, not through the code under test): the
// size, then each 4 KiB page that is not all zeros, with its offset. A hole
// and zeros read the same, so two files with the same bytes have the same
// digest however they are allocated, and a 1 GiB image costs what it holds.
func digest(t testing.TB, p string) string {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) { // O_NOATIME: only for the owner or root
		f, err = os.Open(p)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "size %d\n", fi.Size())
	page, zero := make([]byte, 4096), make([]byte, 4096)
	for off := int64(0); off < fi.Size(); {
		start, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			t.Fatalf("SEEK_DATA %s: %v", p, err)
		}
		end, err := unix.Seek(int(f.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			t.Fatalf("SEEK_HOLE %s: %v", p, err)
		}
		for pos := start &^ 4095; pos < end; pos += 4096 {
			n, err := f.ReadAt(page, pos)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if !bytes.Equal(page[:n], zero[:n]) {
				fmt.Fprintf(h, "page %d\n", pos)
				h.Write(page[:n])
			}
		}
		off = end
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil))
}

// allocated is the disk space p takes (st_blocks).
func allocated(t testing.TB, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// sameHoles checks that every regular file of the copy dst takes the disk
// space its source in src takes (within 5%, and 64 KiB for a small file's
// rounding): holes stayed holes, and no data was dropped as one.
func sameHoles(t testing.TB, src, dst string) {
	t.Helper()
	walk(t, src, func(p string) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			return
		}
		rel, _ := filepath.Rel(src, p)
		a, b := allocated(t, p), allocated(t, filepath.Join(dst, rel))
		if d := b - a; d > a/20+64<<10 || -d > a/20+64<<10 {
			t.Errorf("%s: the copy takes %d bytes on disk, the source %d (apparent size %d)", rel, b, a, fi.Size())
		}
	})
}

// checkDataBytes checks that a copy moved about the data src holds: the
// allocated bytes of its regular files, each inode once, within 5%.
func checkDataBytes(t testing.TB, src string, dataBytes int64) {
	t.Helper()
	var want int64
	seen := map[uint64]bool{}
	walk(t, src, func(p string) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG && !seen[st.Ino] {
			seen[st.Ino] = true
			want += st.Blocks * 512
		}
	})
	if d := dataBytes - want; d > want/20 || -d > want/20 {
		t.Fatalf("%d data bytes moved, but the source's files hold %d: not within 5%%", dataBytes, want)
	}
	t.Logf("%d data bytes moved for %d allocated in the source", dataBytes, want)
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
func noatime(t testing.TB, dir string) {
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
