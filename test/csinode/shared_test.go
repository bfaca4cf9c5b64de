package csinode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// Two nodes' drivers on one shared pool (storage both mount): a volume made
// on one has no node topology, the other publishes it and sees its data,
// and either may delete it.
func TestSharedPoolAcrossTwoNodes(t *testing.T) {
	testutil.RequireRoot(t)
	host := t.TempDir() // the shared storage, mounted at the same path on both
	p := csitest.Pool{Name: "nfs", Path: host, Shared: true}
	a := csitest.Start(t, "node-a", []csitest.Pool{p})
	b := csitest.Start(t, "node-b", []csitest.Pool{p})
	ca, cb := a.Client(t), b.Client(t)

	req := csitest.CreateRequest("pvc-shared", "node-a", MiB, csitest.PoolParams("nfs"))
	req.AccessibilityRequirements = nil // an Immediate StorageClass
	req.VolumeCapabilities[0].AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	resp, err := ca.CreateVolume(ctx(t), req)
	if err != nil {
		t.Fatalf("CreateVolume on node-a: %v", err)
	}
	if topo := resp.GetVolume().GetAccessibleTopology(); len(topo) != 0 {
		t.Fatalf("shared volume topology = %v, want none", topo)
	}
	dir := filepath.Join(host, csitest.VolumesSubdir, "pvc-shared")
	if err := os.WriteFile(filepath.Join(dir, "from-a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}

	target := filepath.Join(t.TempDir(), "mount")
	pub := csitest.PublishRequest("pvc-shared", target, resp.GetVolume().GetVolumeContext())
	pub.VolumeCapability.AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	if _, err := cb.NodePublishVolume(ctx(t), pub); err != nil {
		t.Fatalf("NodePublishVolume on node-b: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(target, "from-a")); err != nil || string(got) != "a" {
		t.Fatalf("node-b reads %q, %v through its mount; want node-a's file", got, err)
	}
	if _, err := cb.NodeUnpublishVolume(ctx(t), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-shared", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-shared"}); err != nil {
		t.Fatalf("DeleteVolume on node-b: %v", err)
	}
	mustNotExist(t, dir)
	list, err := ca.ListVolumes(ctx(t), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetEntries()); n != 0 {
		t.Fatalf("node-a lists %d volumes after node-b deleted the only one", n)
	}
}
