package csinode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// knownContent writes 10 files of 1 MiB spread over three directories (one
// nested), one hard link and one symbolic link into dir. It returns the
// inodes that content occupies, the top directory included: the hard link
// is the same inode as its file, the symlink is an inode of its own.
func knownContent(t *testing.T, dir string) (inodes int64) {
	t.Helper()
	for _, sub := range []string{"a", "b", "a/c"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"f0", "f1", "f2", "f3", "a/f4", "a/f5", "a/f6", "b/f7", "b/f8", "a/c/f9"}
	for _, f := range files {
		writeFile(t, filepath.Join(dir, f), MiB)
	}
	if err := os.Link(filepath.Join(dir, "a/c/f9"), filepath.Join(dir, "b/hardlink-to-f9")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/f4", filepath.Join(dir, "symlink-to-f4")); err != nil {
		t.Fatal(err)
	}
	return 1 + 3 + int64(len(files)) + 1
}

func usage(t *testing.T, resp *csi.NodeGetVolumeStatsResponse, unit csi.VolumeUsage_Unit) *csi.VolumeUsage {
	t.Helper()
	for _, u := range resp.GetUsage() {
		if u.GetUnit() == unit {
			return u
		}
	}
	t.Fatalf("NodeGetVolumeStats has no %v usage: %v", unit, resp)
	return nil
}

// NodeGetVolumeStats reports the volume's own bytes and inodes (not the
// pool's), with the pool's free space and inodes as available.
func TestVolumeStatsKnownContent(t *testing.T) {
	forEachPoolKind(t, func(t *testing.T, poolPath string) {
		// No caching: every call measures.
		e := newEnv(t, poolPath, "--stats-cache-ttl", "0s")
		vol := e.create("pvc-stats", 64*MiB, nil)
		target := filepath.Join(t.TempDir(), "mount")
		e.publish(csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext()))
		defer e.unpublish("pvc-stats", target)
		// Another volume's content must not count.
		e.create("pvc-neighbour", MiB, nil)
		writeFile(t, filepath.Join(e.volDir("pvc-neighbour"), "big"), 4*MiB)

		wantInodes := knownContent(t, target)
		availBefore, inodesBefore := statfs(t, poolPath)
		resp, err := e.c.NodeGetVolumeStats(ctx(t), &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-stats", VolumePath: target})
		if err != nil {
			t.Fatalf("NodeGetVolumeStats: %v", err)
		}
		availAfter, inodesAfter := statfs(t, poolPath)

		b := usage(t, resp, csi.VolumeUsage_BYTES)
		// Directories and filesystem block rounding may add a little; the
		// neighbour's 4 MiB must not be there.
		if b.GetUsed() < 10*MiB || b.GetUsed() > 11*MiB {
			t.Errorf("bytes used = %d; want 10 MiB (%d) plus at most 1 MiB of directories", b.GetUsed(), 10*MiB)
		}
		if !between(b.GetAvailable(), availBefore, availAfter) {
			t.Errorf("bytes available = %d; want the pool's statfs figure (%d..%d)", b.GetAvailable(), availBefore, availAfter)
		}
		if b.GetTotal() != b.GetUsed()+b.GetAvailable() {
			t.Errorf("bytes total = %d; want used+available = %d", b.GetTotal(), b.GetUsed()+b.GetAvailable())
		}
		in := usage(t, resp, csi.VolumeUsage_INODES)
		if in.GetUsed() != wantInodes {
			t.Errorf("inodes used = %d; want exactly %d (top dir, 3 dirs, 10 files, 1 symlink; the hard link counted once)", in.GetUsed(), wantInodes)
		}
		if !between(in.GetAvailable(), inodesBefore, inodesAfter) {
			t.Errorf("inodes available = %d; want the pool's free inodes (%d..%d)", in.GetAvailable(), inodesBefore, inodesAfter)
		}

		// A volume_path where nothing is published is NotFound, as the spec says.
		_, err = e.c.NodeGetVolumeStats(ctx(t), &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-stats", VolumePath: filepath.Join(t.TempDir(), "gone")})
		grpctest.WantCode(t, err, codes.NotFound, "does not exist")
	})
}

// With a cache TTL, a second call returns the measured figure without
// walking again (new files show up only after the TTL).
func TestVolumeStatsCached(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0), "--stats-cache-ttl", "1h")
	vol := e.create("pvc-cached", 32*MiB, nil)
	target := filepath.Join(t.TempDir(), "mount")
	e.publish(csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext()))
	defer e.unpublish("pvc-cached", target)
	writeFile(t, filepath.Join(target, "one"), MiB)
	req := &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-cached", VolumePath: target}
	first, err := e.c.NodeGetVolumeStats(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(target, "two"), MiB)
	second, err := e.c.NodeGetVolumeStats(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []csi.VolumeUsage_Unit{csi.VolumeUsage_BYTES, csi.VolumeUsage_INODES} {
		if a, b := usage(t, first, unit).GetUsed(), usage(t, second, unit).GetUsed(); a != b {
			t.Errorf("%v used: first %d, second %d; want the cached figure", unit, a, b)
		}
	}
	if got := usage(t, first, csi.VolumeUsage_INODES).GetUsed(); got != 2 {
		t.Errorf("inodes used = %d; want 2 (directory and one file)", got)
	}
}
