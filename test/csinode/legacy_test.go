package csinode

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// legacyContext is what hpp-migrate writes into a migrated PV.
func legacyContext(poolName string) map[string]string {
	return map[string]string{contract.ParamStoragePool: poolName, contract.VolumeContextLayout: "legacy"}
}

// A volume hpp-legacy made in its PV_DIR (the pool's legacyPath), migrated
// onto the CSI driver: hpp-csi bind-mounts it in place (ReadWriteMany, as
// the legacy PV had it, accepted), measures it, and deletes it in place
// through its trash, leaving hpp-legacy's own entries in that directory
// alone; the same id in two legacy directories is refused, never guessed.
func TestLegacyVolumeInPlace(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	pvDir, other := filepath.Join(dir, "hpvolumes"), filepath.Join(dir, "other")
	for _, p := range []string{pvDir, other} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// hpp-legacy's store, as cmd/hpp-legacy opens PV_DIR.
	legacy, err := dirvol.Open(pvDir, dirvol.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := legacy.Create(context.Background(), "pvc-old", dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, CapacityBytes: 16 * MiB}); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(pvDir, "pvc-old")
	writeFile(t, filepath.Join(src, "written-by-legacy-pod"), 1*MiB)
	inFlight := filepath.Join(pvDir, dirvol.StagingDir, "local.dir-in-flight")
	if err := os.Mkdir(inFlight, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(pvDir, "pvc-dup"), filepath.Join(other, "pvc-dup")} {
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}

	d := csitest.Start(t, node, []csitest.Pool{
		{Name: "legacy", Path: pvDir, LegacyPath: pvDir},
		{Name: "other", Path: other, LegacyPath: other},
	})
	c := d.Client(t)
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("hpp-csi's start removed hpp-legacy's staging entry: %v", err)
	}

	target := filepath.Join(t.TempDir(), "pods", "uid", "mount")
	req := csitest.PublishRequest("pvc-old", target, legacyContext("legacy"))
	req.VolumeCapability = csitest.MountCapability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	if _, err := c.NodePublishVolume(ctx(t), req); err != nil {
		t.Fatalf("NodePublishVolume of a legacy volume: %v", err)
	}
	if m := mounted(t, target); len(m) != 1 || filepath.Base(m[0].Root) != "pvc-old" {
		t.Fatalf("mounts at target: %+v; want one bind of %s", m, src)
	}
	if fi, err := os.Stat(filepath.Join(target, "written-by-legacy-pod")); err != nil || fi.Size() != 1*MiB {
		t.Fatalf("the legacy pod's file through the CSI mount: %v, %v", fi, err)
	}

	stats, err := c.NodeGetVolumeStats(ctx(t), &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-old", VolumePath: target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	if used := stats.GetUsage()[0].GetUsed(); used < 1*MiB {
		t.Fatalf("used %d bytes, want at least the 1 MiB file", used)
	}
	health, err := c.NodeGetVolumeHealth(ctx(t), &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-old", VolumePublishPath: target})
	if err != nil || len(health.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Fatalf("NodeGetVolumeHealth = %v, %v; want healthy", health, err)
	}

	if _, err := c.NodeUnpublishVolume(ctx(t), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-old", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-old"}); err != nil {
		t.Fatalf("DeleteVolume of a legacy volume: %v", err)
	}
	mustNotExist(t, src)
	mustNotExist(t, filepath.Join(pvDir, dirvol.RecordsDir, "pvc-old"))
	if left := csitest.Purged(pvDir); len(left) != 0 {
		t.Fatalf("trash of the legacy directory not purged: %v", left)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("deleting a legacy volume touched hpp-legacy's staging entry: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pvDir, csitest.VolumesSubdir)); err != nil {
		t.Fatalf("the pool's own directory after deleting a legacy volume: %v", err)
	}

	_, err = c.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-dup"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, `volume "pvc-dup" exists in more than one legacy directory`,
		filepath.Join(pvDir, "pvc-dup"), filepath.Join(other, "pvc-dup"), "does not guess")
	for _, p := range []string{filepath.Join(pvDir, "pvc-dup"), filepath.Join(other, "pvc-dup")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("an ambiguous legacy volume was touched: %v", err)
		}
	}
}
