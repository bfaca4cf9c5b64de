package dirvol_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

const mib = 1 << 20

func usage(t *testing.T, p string) dirvol.Usage {
	t.Helper()
	u, err := dirvol.DirUsage(context.Background(), p)
	if err != nil {
		t.Fatalf("DirUsage(%s): %v", p, err)
	}
	return u
}

func testUsageKnown(t *testing.T, root string) {
	s := open(t, root, nil)
	vol := mustCreate(t, s, "u", spec(0, 0))
	for i := range 3 {
		writeFile(t, filepath.Join(vol.Path, fmt.Sprintf("f%d", i)), mib)
	}
	u := usage(t, vol.Path)
	// The directory itself takes at most a few blocks; a file counted
	// twice would add a whole MiB.
	if u.Bytes < 3*mib || u.Bytes >= 4*mib {
		t.Errorf("Bytes = %d, want [3 MiB, 4 MiB) for 3 files of 1 MiB", u.Bytes)
	}
	if u.Inodes != 4 {
		t.Errorf("Inodes = %d, want 4 (the directory and 3 files)", u.Inodes)
	}
	// Nested directories are walked.
	if err := os.MkdirAll(filepath.Join(vol.Path, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vol.Path, "a", "b", "g"), mib)
	if u2 := usage(t, vol.Path); u2.Inodes != 7 || u2.Bytes < u.Bytes+mib {
		t.Errorf("after adding a/b/g (1 MiB): %+v, want 7 inodes and >= %d bytes", u2, u.Bytes+mib)
	}
}

func testUsageHardLink(t *testing.T, root string) {
	dir := filepath.Join(root, "h")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "f"), mib)
	base := usage(t, dir)
	if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := usage(t, dir); got.Bytes != base.Bytes || got.Inodes != base.Inodes {
		t.Errorf("with a hard link: %+v, want %+v (one inode, counted once)", got, base)
	}
	// A copy is a second file and is counted.
	writeFile(t, filepath.Join(dir, "copy"), mib)
	if got := usage(t, dir); got.Bytes < base.Bytes+mib || got.Inodes != base.Inodes+1 {
		t.Errorf("with a copy: %+v, want >= %d bytes and %d inodes", got, base.Bytes+mib, base.Inodes+1)
	}
}

func testUsageSymlink(t *testing.T, root string) {
	big := filepath.Join(root, "big")
	vol := filepath.Join(root, "vol")
	for _, d := range []string{big, vol} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(big, "f"), 2*mib)
	if err := os.Symlink(big, filepath.Join(vol, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(big, "f"), filepath.Join(vol, "filelink")); err != nil {
		t.Fatal(err)
	}
	u := usage(t, vol)
	if u.Inodes != 3 || u.Bytes >= mib {
		t.Errorf("DirUsage = %+v, want 3 inodes (dir and two links) and far less than the 2 MiB behind the links", u)
	}
}

// countingCtx ends after its Err has been asked a given number of times:
// a cancellation in the middle of a walk without any timing.
type countingCtx struct {
	context.Context
	left int
}

func (c *countingCtx) Err() error {
	if c.left <= 0 {
		return context.Canceled
	}
	c.left--
	return nil
}

func testUsageCancelled(t *testing.T, root string) {
	dir := filepath.Join(root, "many")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%03d", i)), 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := dirvol.DirUsage(ctx, dir)
	if want := "usage of " + dir + ": walk stopped after 0 entries: context canceled"; err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want %s", err, want)
	}
	// The context is checked every 256 entries: allowing two checks stops
	// the walk at the third, after 512 of the 601 entries.
	u, err := dirvol.DirUsage(&countingCtx{Context: context.Background(), left: 2}, dir)
	if want := "usage of " + dir + ": walk stopped after 512 entries: context canceled"; err == nil || err.Error() != want {
		t.Errorf("cancelled midway: %v (usage %+v), want %s and no partial usage", err, u, want)
	}
	if u != (dirvol.Usage{}) {
		t.Errorf("cancelled walk returned a partial usage %+v", u)
	}
	if u := usage(t, dir); u.Inodes != 601 {
		t.Errorf("full walk: %d inodes, want 601", u.Inodes)
	}
}

func TestDirUsageBadInput(t *testing.T) {
	for _, c := range []struct{ path, reason string }{
		{"", "must not be empty"},
		{"rel/dir", `"rel/dir" must be an absolute path`},
		{"/a/../b", `"/a/../b" must be a clean path ("/b")`},
	} {
		_, err := dirvol.DirUsage(context.Background(), c.path)
		requireFieldError(t, err, "path", c.reason)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := dirvol.DirUsage(context.Background(), missing)
	if want := "usage of " + missing + ": lstat " + missing + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("missing: %v, want %s", err, want)
	}
}
