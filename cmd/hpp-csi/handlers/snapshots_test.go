package handlers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// withSnapshots turns snapshots on for "fast" (area in its default place)
// and, when inPool, for "slow" with the KubeVirt operator's layout: the
// area directly in the volumes directory.
func withSnapshots(inPool bool) func(*Config) {
	return func(c *Config) {
		editPools(c, func(p *pool.Pool) {
			switch {
			case p.Name == "fast":
				p.SnapshotProvider = pool.SnapshotProviderReflink
			case inPool:
				p.SnapshotProvider = pool.SnapshotProviderReflink
				p.SnapshotPath = filepath.Join(p.Path, "snapshots")
			}
		})
	}
}

func snapReq(name, vol string) *csi.CreateSnapshotRequest {
	return &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: vol}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotRestoreAndClone(t *testing.T) {
	h := newHarness(t, withSnapshots(false))
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 8<<20))
	writeFile(t, filepath.Join(h.pools["fast"], "pvc-1", "f"), "at snapshot time")
	snap, err := h.d.CreateSnapshot(ctx, snapReq("snap-1", "pvc-1"))
	if err != nil {
		t.Fatal(err)
	}
	s := snap.GetSnapshot()
	if !s.GetReadyToUse() || s.GetSizeBytes() != 8<<20 || s.GetSourceVolumeId() != "pvc-1" || s.GetCreationTime() == nil {
		t.Fatalf("snapshot = %v", s)
	}
	writeFile(t, filepath.Join(h.pools["fast"], "pvc-1", "f"), "later")

	restore := createReq("pvc-2", "slow", 8<<20)
	restore.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}}
	resp, err := h.d.CreateVolume(ctx, restore)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVolume().GetContentSource().GetSnapshot().GetSnapshotId() != "snap-1" {
		t.Fatalf("content source = %v", resp.GetVolume().GetContentSource())
	}
	if data, _ := os.ReadFile(filepath.Join(h.pools["slow"], "pvc-2", "f")); string(data) != "at snapshot time" {
		t.Fatalf("restored content = %q", data)
	}
	// Retry: same answer; another source under the same name: refused.
	if _, err := h.d.CreateVolume(ctx, restore); err != nil {
		t.Fatalf("retried restore = %v", err)
	}
	clone := createReq("pvc-2", "slow", 8<<20)
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "pvc-1"}}}
	_, err = h.d.CreateVolume(ctx, clone)
	grpctest.WantCode(t, err, codes.AlreadyExists, `volume "pvc-2" already exists with content source "snapshot:snap-1", not "volume:pvc-1"`)

	clone.Name = "pvc-3"
	h.mustCreate(t, clone)
	if data, _ := os.ReadFile(filepath.Join(h.pools["slow"], "pvc-3", "f")); string(data) != "later" {
		t.Fatalf("cloned content = %q", data)
	}
	// A source larger than the request.
	clone.Name, clone.CapacityRange = "pvc-4", &csi.CapacityRange{RequiredBytes: 1 << 20}
	_, err = h.d.CreateVolume(ctx, clone)
	grpctest.WantCode(t, err, codes.OutOfRange, "volume:pvc-1 is 8388608 bytes, more than the requested 1048576 bytes")
	// Sources this node does not hold.
	clone.Name, clone.CapacityRange = "pvc-4", nil
	clone.VolumeContentSource.GetVolume().VolumeId = "pvc-elsewhere"
	_, err = h.d.CreateVolume(ctx, clone)
	grpctest.WantCode(t, err, codes.NotFound, `volume "pvc-elsewhere" does not exist on node node-a (a clone is made on the node that holds its source)`)
	restore.Name = "pvc-5"
	restore.VolumeContentSource.GetSnapshot().SnapshotId = "snap-none"
	_, err = h.d.CreateVolume(ctx, restore)
	grpctest.WantCode(t, err, codes.NotFound, `snapshot "snap-none" does not exist on node node-a`)
	for _, id := range []string{"pvc-4", "pvc-5"} {
		if _, err := os.Stat(filepath.Join(h.pools["slow"], id)); !os.IsNotExist(err) {
			t.Fatalf("refused volume %s exists: %v", id, err)
		}
	}
}

func TestSnapshotRefusals(t *testing.T) {
	h := newHarness(t, withSnapshots(false))
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-slow", "slow", 1<<20))
	_, err := h.d.CreateSnapshot(ctx, snapReq("snap-1", "pvc-elsewhere"))
	grpctest.WantCode(t, err, codes.NotFound, `volume "pvc-elsewhere" is not on node node-a: snapshots are node-local`, "--node-deployment")
	_, err = h.d.CreateSnapshot(ctx, snapReq("snap-1", "pvc-slow"))
	grpctest.WantCode(t, err, codes.FailedPrecondition, `storage pool "slow" on node node-a takes no snapshots: set its snapshotProvider`)
	_, err = h.d.CreateSnapshot(ctx, snapReq("", "pvc-slow"))
	grpctest.WantCode(t, err, codes.InvalidArgument, "name: required")
	_, err = h.d.CreateSnapshot(ctx, snapReq("snap-1", ""))
	grpctest.WantCode(t, err, codes.InvalidArgument, "source_volume_id: required")
	_, err = h.d.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: "snap-none"})
	grpctest.WantCode(t, err, codes.NotFound, `snapshot "snap-none" does not exist on node node-a`)
	if _, err := h.d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap-none"}); err != nil {
		t.Fatalf("DeleteSnapshot of a missing snapshot = %v", err)
	}
}

func TestListSnapshotsPages(t *testing.T) {
	h := newHarness(t, withSnapshots(true))
	ctx := context.Background()
	for _, v := range []struct{ id, pool string }{{"pvc-a", "fast"}, {"pvc-b", "slow"}} {
		h.mustCreate(t, createReq(v.id, v.pool, 1<<20))
	}
	for _, s := range []struct{ id, vol string }{{"snap-1", "pvc-a"}, {"snap-2", "pvc-a"}, {"snap-3", "pvc-b"}} {
		if _, err := h.d.CreateSnapshot(ctx, snapReq(s.id, s.vol)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	token := ""
	for {
		resp, err := h.d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetEntries() {
			got = append(got, e.GetSnapshot().GetSnapshotId())
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if len(got) != 3 || got[0] != "snap-1" || got[1] != "snap-2" || got[2] != "snap-3" {
		t.Fatalf("pages = %v", got)
	}
	resp, err := h.d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: "pvc-b"})
	if err != nil || len(resp.GetEntries()) != 1 || resp.GetEntries()[0].GetSnapshot().GetSnapshotId() != "snap-3" {
		t.Fatalf("by source = %v, %v", resp, err)
	}
	_, err = h.d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "bogus"})
	grpctest.WantCode(t, err, codes.Aborted, "was not issued by this driver")

	// "slow" keeps its snapshots in <pool>/snapshots, as the KubeVirt
	// operator lays it out: never a volume.
	vols, err := h.d.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range vols.GetEntries() {
		if e.GetVolume().GetVolumeId() == "snapshots" {
			t.Fatal("the snapshot area is listed as a volume")
		}
	}
	if _, err := os.Stat(filepath.Join(h.pools["slow"], "snapshots", "snap-3", "data")); err != nil {
		t.Fatalf("snapshot not where snapshotPath says: %v", err)
	}
	_, err = h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "snapshots"})
	grpctest.WantCode(t, err, codes.InvalidArgument, `"snapshots" is not a volume: it is hpp's snapshot area in this pool`)
	if _, err := os.Stat(filepath.Join(h.pools["slow"], "snapshots", "snap-3")); err != nil {
		t.Fatalf("snapshot area touched by DeleteVolume: %v", err)
	}
	_, err = h.d.CreateVolume(ctx, createReq("snapshots", "slow", 1))
	grpctest.WantCode(t, err, codes.InvalidArgument, "is not a volume")
}
