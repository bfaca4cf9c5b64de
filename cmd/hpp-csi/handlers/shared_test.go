package handlers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

func withMode(req *csi.CreateVolumeRequest, m csi.VolumeCapability_AccessMode_Mode) *csi.CreateVolumeRequest {
	req.VolumeCapabilities[0].AccessMode.Mode = m
	return req
}

// A shared pool's volume has no node topology, whatever node asked, and
// Immediate StorageClasses (no topology at all, or found Immediate by the
// claim lookup) are served.
func TestSharedPoolCreateHasNoTopology(t *testing.T) {
	h := newHarness(t, sharedSlow)
	h.d.deps.Binding = fakeBinding{immediate: true}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		topo *csi.TopologyRequirement
	}{{"pvc-immediate", nil}, {"pvc-elsewhere", onNode("node-b")}, {"pvc-here", onNode(testNode)}} {
		req := withMode(createReq(tc.name, "slow", 1<<20), csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
		req.AccessibilityRequirements = tc.topo
		req.Parameters[contract.ParamOverlayCSI] = "true" // as the KubeVirt operator's StorageClass has it
		req.Parameters[paramPVCNamespace], req.Parameters[paramPVCName] = "ns", "claim"
		resp, err := h.d.CreateVolume(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if topo := resp.GetVolume().GetAccessibleTopology(); len(topo) != 0 {
			t.Fatalf("%s: shared volume has topology %v, want none", tc.name, topo)
		}
		if _, err := os.Stat(filepath.Join(h.pools["slow"], tc.name)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	// The node-local pool keeps its rules.
	_, err := h.d.CreateVolume(ctx, withMode(createReq("pvc-rwx", "fast", 1), csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))
	grpctest.WantCode(t, err, codes.InvalidArgument, "MULTI_NODE_MULTI_WRITER is not supported", `"shared": true`)
	req := createReq("pvc-imm", "fast", 1)
	req.Parameters[paramPVCNamespace], req.Parameters[paramPVCName] = "ns", "claim"
	_, err = h.d.CreateVolume(ctx, req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "uses volumeBindingMode Immediate")
	resp, err := h.d.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetEntries() {
		if len(e.GetVolume().GetAccessibleTopology()) != 0 {
			t.Fatalf("listed shared volume %s with topology", e.GetVolume().GetVolumeId())
		}
	}
}

// Any node publishes a shared pool's volume, in multi-node modes too; a
// node-local volume refuses them.
func TestSharedPoolPublishMultiNode(t *testing.T) {
	h := newHarness(t, sharedSlow)
	ctx := context.Background()
	for _, p := range []string{"slow", "fast"} {
		h.mustCreate(t, createReq("pvc-"+p, p, 1))
	}
	publish := func(id, target string) error {
		c := mountCap()
		c.AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		_, err := h.d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: c})
		return err
	}
	target := filepath.Join(h.dir, "pods", "a", "mount")
	if err := publish("pvc-slow", target); err != nil {
		t.Fatalf("multi-node publish of a shared volume: %v", err)
	}
	if h.mounter.Mounts[target] != filepath.Join(h.pools["slow"], "pvc-slow") {
		t.Fatalf("mounts = %v", h.mounter.Mounts)
	}
	// ReadOnlyMany mounts read-only.
	roTarget := filepath.Join(h.dir, "pods", "ro", "mount")
	ro := mountCap()
	ro.AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	if _, err := h.d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "pvc-slow", TargetPath: roTarget, VolumeCapability: ro}); err != nil {
		t.Fatal(err)
	}
	if !h.mounter.ReadOnly[roTarget] {
		t.Fatal("MULTI_NODE_READER_ONLY publish is writable")
	}
	err := publish("pvc-fast", filepath.Join(h.dir, "pods", "b", "mount"))
	grpctest.WantCode(t, err, codes.InvalidArgument, "volume_capability: access mode MULTI_NODE_MULTI_WRITER is not supported")
	v, err := h.d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "pvc-slow",
		VolumeCapabilities: []*csi.VolumeCapability{withMode(createReq("x", "slow", 1), csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY).VolumeCapabilities[0]}})
	if err != nil || v.GetConfirmed() == nil {
		t.Fatalf("ValidateVolumeCapabilities of a shared volume = %v, %v; want confirmed", v, err)
	}
}

func TestOverlayCSIParameterMustBeBoolean(t *testing.T) {
	h := newHarness(t, sharedSlow)
	req := createReq("pvc-1", "slow", 1)
	req.Parameters[contract.ParamOverlayCSI] = "yes"
	_, err := h.d.CreateVolume(context.Background(), req)
	grpctest.WantCode(t, err, codes.InvalidArgument, `parameters.`+contract.ParamOverlayCSI+`: "yes" must be "true" or "false"`)
}

// A volume that cannot be labelled is removed again, for CreateVolume and
// for an inline ephemeral volume alike (one provision path).
func TestProvisionUndoesUnlabelledVolume(t *testing.T) {
	h := newHarness(t)
	h.labeler.Err = errors.New("setxattr: operation not permitted")
	ctx := context.Background()
	_, err := h.d.CreateVolume(ctx, createReq("pvc-1", "fast", 1))
	grpctest.WantCode(t, err, codes.Internal, "labelling volume for SELinux: setxattr: operation not permitted")
	eph := &csi.NodePublishVolumeRequest{VolumeId: "csi-abc", TargetPath: filepath.Join(h.dir, "pods", "e", "mount"), VolumeCapability: mountCap(),
		VolumeContext: map[string]string{ephemeralContextKey: "true", contract.ParamStoragePool: "fast"}}
	_, err = h.d.NodePublishVolume(ctx, eph)
	grpctest.WantCode(t, err, codes.Internal, "labelling ephemeral volume for SELinux: setxattr: operation not permitted")
	for _, id := range []string{"pvc-1", "csi-abc"} {
		if _, err := os.Stat(filepath.Join(h.pools["fast"], id)); !os.IsNotExist(err) {
			t.Fatalf("unlabelled %s left in the pool: %v", id, err)
		}
	}
}
