package handlers

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// remoteTree makes the source another node serves: a directory with an
// owner and mode, random data with an xattr and old times, a hard link to
// it, a symlink, a character device and a sparse file.
func remoteTree(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "d")
	must(os.Mkdir(dir, 0o750))
	must(os.Chown(dir, 1234, 5678))
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	file := filepath.Join(dir, "data")
	must(os.WriteFile(file, data, 0o640))
	must(os.Chown(file, 1000, 1000))
	must(unix.Setxattr(file, "user.hpp", []byte("kept"), 0))
	must(os.Link(file, filepath.Join(root, "link")))
	must(os.Symlink("d/data", filepath.Join(root, "sym")))
	must(unix.Mknod(filepath.Join(root, "null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	sparse, err := os.Create(filepath.Join(root, "sparse"))
	must(err)
	must(sparse.Truncate(64 << 20))
	_, err = sparse.WriteAt([]byte("middle"), 32<<20)
	must(err)
	must(sparse.Close())
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(file, old, old))
	must(os.Chtimes(dir, old, old))
	return root
}

// sameTree fails unless got holds what want holds, entry by entry: type,
// mode, owner, times, size, data, link targets, devices, xattrs and hard
// links; sparse files must stay sparse.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	links := map[uint64]string{}
	gotLinks := map[uint64]string{}
	err := filepath.WalkDir(want, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == want {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		var ws, gs unix.Stat_t
		if err := unix.Lstat(p, &ws); err != nil {
			return err
		}
		if err := unix.Lstat(filepath.Join(got, rel), &gs); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if ws.Mode != gs.Mode || ws.Uid != gs.Uid || ws.Gid != gs.Gid || ws.Size != gs.Size || ws.Rdev != gs.Rdev {
			return fmt.Errorf("%s: mode/owner/size/rdev %o %d:%d %d %d, want %o %d:%d %d %d", rel,
				gs.Mode, gs.Uid, gs.Gid, gs.Size, gs.Rdev, ws.Mode, ws.Uid, ws.Gid, ws.Size, ws.Rdev)
		}
		if ws.Mode&unix.S_IFMT != unix.S_IFDIR && ws.Mtim != gs.Mtim {
			return fmt.Errorf("%s: mtime %v, want %v", rel, gs.Mtim, ws.Mtim)
		}
		switch ws.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			a, _ := os.Readlink(p)
			b, _ := os.Readlink(filepath.Join(got, rel))
			if a != b {
				return fmt.Errorf("%s: link to %q, want %q", rel, b, a)
			}
		case unix.S_IFREG:
			a, _ := os.ReadFile(p)
			b, _ := os.ReadFile(filepath.Join(got, rel))
			if !bytes.Equal(a, b) {
				return fmt.Errorf("%s: data differs", rel)
			}
			if gs.Blocks > ws.Blocks+64 {
				return fmt.Errorf("%s: %d blocks allocated, the source %d (holes lost)", rel, gs.Blocks, ws.Blocks)
			}
			if first, ok := links[ws.Ino]; ok && gotLinks[gs.Ino] != first {
				return fmt.Errorf("%s: not a hard link of %s", rel, first)
			}
			links[ws.Ino] = rel
			if _, ok := gotLinks[gs.Ino]; !ok {
				gotLinks[gs.Ino] = rel
			}
		}
		buf := make([]byte, 64)
		wn, werr := unix.Lgetxattr(p, "user.hpp", buf)
		gn, gerr := unix.Lgetxattr(filepath.Join(got, rel), "user.hpp", buf[32:])
		if (werr == nil) != (gerr == nil) || werr == nil && string(buf[:wn]) != string(buf[32:32+gn]) {
			return fmt.Errorf("%s: xattr user.hpp differs (%w, %w)", rel, werr, gerr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
