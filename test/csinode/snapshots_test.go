package csinode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// The real binary on XFS with reflink (loop device) and on tmpfs (copy):
// a snapshot, a restore and a clone keep the data, the driver reports the
// copy mode it probed, and expansion is bookkeeping checked against the
// pool's size.
func TestSnapshotCloneExpandXFS(t *testing.T) {
	snapshotCloneExpand(t, testutil.LoopXFS(t, 512*MiB), "reflink")
}

func TestSnapshotCloneExpandTmpfs(t *testing.T) {
	snapshotCloneExpand(t, csitest.Tmpfs(t, 256*MiB, 0), "copy")
}

func snapshotCloneExpand(t *testing.T, poolPath, wantMode string) {
	e := newEnvPool(t, csitest.Pool{Name: poolName, Path: poolPath, SnapshotProvider: "reflink"})
	if !strings.Contains(e.d.Log(), `"copy": "`+wantMode+`"`) {
		t.Fatalf("driver log does not report copy mode %q:\n%s", wantMode, e.d.Log())
	}
	e.create("pvc-src", 64*MiB, nil)
	writeFile(t, filepath.Join(e.volDir("pvc-src"), "disk.img"), 16*MiB)

	snap, err := e.c.CreateSnapshot(ctx(t), &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "pvc-src"})
	if err != nil {
		t.Fatal(err)
	}
	if s := snap.GetSnapshot(); !s.GetReadyToUse() || s.GetSizeBytes() != 64*MiB {
		t.Fatalf("snapshot = %v", s)
	}
	snapData := filepath.Join(e.pool, csitest.VolumesSubdir, ".hpp-snapshots", "snap-1", "data", "disk.img")
	if fi, err := os.Stat(snapData); err != nil || fi.Size() != 16*MiB {
		t.Fatalf("snapshot data %s: %v, %v", snapData, fi, err)
	}
	if err := os.Remove(filepath.Join(e.volDir("pvc-src"), "disk.img")); err != nil {
		t.Fatal(err)
	}

	restore := csitest.CreateRequest("pvc-restored", node, 64*MiB, csitest.PoolParams(poolName))
	restore.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}}
	if _, err := e.c.CreateVolume(ctx(t), restore); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(e.volDir("pvc-restored"), "disk.img")); err != nil || fi.Size() != 16*MiB {
		t.Fatalf("restored data: %v, %v", fi, err)
	}
	clone := csitest.CreateRequest("pvc-clone", node, 64*MiB, csitest.PoolParams(poolName))
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "pvc-restored"}}}
	if _, err := e.c.CreateVolume(ctx(t), clone); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(e.volDir("pvc-clone"), "disk.img")); err != nil || fi.Size() != 16*MiB {
		t.Fatalf("cloned data: %v, %v", fi, err)
	}

	resp, err := e.c.ControllerExpandVolume(ctx(t), &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-src", CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * MiB}})
	if err != nil || resp.GetCapacityBytes() != 128*MiB || resp.GetNodeExpansionRequired() {
		t.Fatalf("expand = %v, %v", resp, err)
	}
	if got := e.readMeta("pvc-src")["capacityBytes"]; got != float64(128*MiB) {
		t.Fatalf("record capacityBytes = %v", got)
	}
	_, err = e.c.ControllerExpandVolume(ctx(t), &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-src", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 40}})
	grpctest.WantCode(t, err, codes.OutOfRange, "exceeds the total size")

	if _, err := e.c.DeleteSnapshot(ctx(t), &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"}); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, filepath.Dir(filepath.Dir(snapData)))
}
