package handlers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// A volume the KubeVirt driver made is a plain directory in the pool, with
// no hpp record. It is listed, published with the volume context that
// driver stored in its PV (the StorageClass parameters, possibly none),
// measured and deleted where it is.
func TestVolumeOfTheKubeVirtDriverIsAdopted(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	dir := filepath.Join(h.pools["slow"], "pvc-kubevirt")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "disk.img"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := h.d.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var found *csi.Volume
	for _, e := range list.GetEntries() {
		if e.GetVolume().GetVolumeId() == "pvc-kubevirt" {
			found = e.GetVolume()
		}
	}
	if found == nil || found.GetVolumeContext()[contract.ParamStoragePool] != "slow" {
		t.Fatalf("ListVolumes = %v; want pvc-kubevirt in pool slow", list.GetEntries())
	}
	for i, volCtx := range []map[string]string{
		nil, // a StorageClass without parameters
		{contract.ParamStoragePool: "slow", contract.ParamOverlayCSI: "true", "csi.storage.k8s.io/pvc/name": "disk", "someOtherKey": "kept by that driver"},
	} {
		target := filepath.Join(h.dir, "pods", string(rune('a'+i)), "mount")
		if _, err := h.d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "pvc-kubevirt", TargetPath: target,
			VolumeCapability: mountCap(), VolumeContext: volCtx}); err != nil {
			t.Fatalf("publish with context %v: %v", volCtx, err)
		}
		if h.mounter.Mounts[target] != dir {
			t.Fatalf("mounted %q at %s, want %s", h.mounter.Mounts[target], target, dir)
		}
		stats, err := h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-kubevirt", VolumePath: target})
		if err != nil {
			t.Fatal(err)
		}
		if used := stats.GetUsage()[0].GetUsed(); used < 1<<20 {
			t.Fatalf("measured %d bytes used, want at least the 1 MiB file", used)
		}
		if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-kubevirt", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "disk.img")); err != nil {
			t.Fatalf("unpublish touched the volume's data: %v", err)
		}
	}
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-kubevirt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("DeleteVolume left the directory: %v", err)
	}
}
