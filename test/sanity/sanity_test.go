// The kubernetes-csi sanity suite against the real hpp-csi binary, over a
// real unix socket, with real pool directories and real bind mounts (root).
//
// The "sanity" pool takes snapshots (snapshotProvider "reflink", area in
// its default place), so the snapshot, restore and clone specs run.
//
// ControllerExpandVolume and NodeExpandVolume both run (the node call
// raises the project quota of pools with enforceSize, and only records the
// size elsewhere).
//
// Specs the suite skips for hpp-csi, and why (each is a capability hpp-csi
// does not claim, so the suite skips it itself):
//   - SNAPSHOT_ACCESSIBILITY_CONSTRAINTS: a snapshot is reachable wherever
//     its node's volumes are; hpp-csi reports no snapshot topology.
//   - ControllerModifyVolume / ModifyVolume: no mutable parameters.
//   - ControllerPublish/Unpublish (incl. readonly, node attach limit):
//     hostpath volumes are already on the node; nothing to attach.
//   - NodeStageVolume / NodeUnstageVolume: publish bind mounts directly.
//   - GroupController (volume group snapshots): not supported.
//   - "No MaxVolumesPerNode" / "testnodevolumeattachlimit not enabled": the
//     driver reports no per-node limit by default.
//   - block access type: the suite only runs mount volumes here
//     (TestVolumeAccessType "mount"); block is refused, see driver tests.
//
// One adaptation: the suite sends most CreateVolume calls without topology.
// hpp-csi refuses those on purpose (only WaitForFirstConsumer is supported,
// where the CO always names the node), so the client adds this node's
// segment to CreateVolume calls that lack one, as csi-provisioner does.
package sanity

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const nodeID = "sanity-node"

func TestSanity(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "csi-sanity needs root for real bind mounts (running as uid %d)", os.Geteuid())
	}
	work := t.TempDir()
	pools := []csitest.Pool{
		{Name: "sanity", Path: filepath.Join(work, "pool-sanity"), SnapshotProvider: "reflink"},
		{Name: "other", Path: filepath.Join(work, "pool-other")},
	}
	for _, p := range pools {
		if err := os.MkdirAll(p.Path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := csitest.Start(t, nodeID, pools)

	cfg := sanity.NewTestConfig()
	cfg.Address = d.Socket
	cfg.TargetPath = filepath.Join(work, "target")
	cfg.StagingPath = filepath.Join(work, "staging")
	cfg.TestVolumeSize = 16 << 20
	cfg.TestVolumeParameters = map[string]string{contract.ParamStoragePool: "sanity"}
	cfg.TestVolumeAccessType = "mount"
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithUnaryInterceptor(addNodeTopology))
	sanity.Test(t, cfg)
}

// addNodeTopology gives topology-less CreateVolume calls this node's segment.
func addNodeTopology(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if cv, ok := req.(*csi.CreateVolumeRequest); ok && cv.GetAccessibilityRequirements() == nil {
		seg := &csi.Topology{Segments: map[string]string{contract.TopologyKey: nodeID}}
		cv.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{seg}, Preferred: []*csi.Topology{seg}}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
