package csinode

import (
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const headroom = 8 * MiB

func capacityRequest(node string) *csi.GetCapacityRequest {
	return &csi.GetCapacityRequest{
		VolumeCapabilities: []*csi.VolumeCapability{csitest.RWO()},
		Parameters:         csitest.PoolParams(poolName),
		AccessibleTopology: csitest.Segment(node),
	}
}

// getCapacity returns available and maximum_volume_size (-1 when unset).
func getCapacity(t *testing.T, e *env, req *csi.GetCapacityRequest) (avail, maxSize int64) {
	t.Helper()
	resp, err := e.c.GetCapacity(ctx(t), req)
	if err != nil {
		t.Fatalf("GetCapacity: %v", err)
	}
	maxSize = -1
	if resp.GetMaximumVolumeSize() != nil {
		maxSize = resp.GetMaximumVolumeSize().GetValue()
	}
	return resp.GetAvailableCapacity(), maxSize
}

func totalBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Frsize
}

// GetCapacity offers free space minus the pool's headroom, never the whole
// filesystem, for this node's segment only.
func TestGetCapacity(t *testing.T) {
	poolPath := csitest.Tmpfs(t, 64*MiB, 0)
	e := newEnvPool(t, csitest.Pool{Name: poolName, Path: poolPath, ReservedBytes: headroom})
	writeFile(t, filepath.Join(poolPath, "not-a-volume"), 10*MiB)

	before, _ := statfs(t, poolPath)
	avail, maxSize := getCapacity(t, e, capacityRequest(node))
	after, _ := statfs(t, poolPath)
	if !between(avail, before-headroom, after-headroom) {
		t.Errorf("available_capacity = %d; want free (%d..%d) minus headroom %d", avail, before, after, headroom)
	}
	if maxSize != avail {
		t.Errorf("maximum_volume_size = %d; want exactly available_capacity %d (not the filesystem's %d)", maxSize, avail, totalBytes(t, poolPath))
	}

	noTopology := capacityRequest(node)
	noTopology.AccessibleTopology = nil
	if a, _ := getCapacity(t, e, noTopology); a != avail {
		t.Errorf("without topology: available %d; want this node's %d", a, avail)
	}
	for name, req := range map[string]*csi.GetCapacityRequest{
		"another node":  capacityRequest("node-b"),
		"unknown pool":  {Parameters: csitest.PoolParams("elsewhere"), AccessibleTopology: csitest.Segment(node)},
		"block volumes": {VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}, Parameters: csitest.PoolParams(poolName), AccessibleTopology: csitest.Segment(node)},
	} {
		if a, m := getCapacity(t, e, req); a != 0 || m > 0 {
			t.Errorf("%s: available %d, maximum %d; want 0", name, a, m)
		}
	}
}

// A volume larger than the filesystem can never fit (OutOfRange); one
// larger than what is offered now does not fit now (ResourceExhausted); one
// of exactly the offered size fits.
func TestCreateVolumeLargerThanPool(t *testing.T) {
	poolPath := csitest.Tmpfs(t, 64*MiB, 0)
	e := newEnvPool(t, csitest.Pool{Name: poolName, Path: poolPath, ReservedBytes: headroom})
	total := totalBytes(t, poolPath)

	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-huge", node, total+MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.OutOfRange, "exceeds the total size", poolName)

	free, _ := statfs(t, poolPath)
	// Fits the free space, but not once the headroom is kept.
	_, err = e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-headroom", node, free-headroom/2, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.ResourceExhausted, poolName, "less than the requested")
	onlyHidden(t, e)

	offered, _ := getCapacity(t, e, capacityRequest(node))
	e.create("pvc-fits", offered, nil)
}

// With --reservation-aware-capacity, a volume's request counts against the
// pool until it is written; without it, only written data does.
func TestReservationAwareCapacity(t *testing.T) {
	testutil.RequireRoot(t)
	for _, aware := range []bool{false, true} {
		name := "plain"
		var extra []string
		if aware {
			name = "reservation-aware"
			extra = []string{"--reservation-aware-capacity", "--stats-cache-ttl", "1h"}
		}
		t.Run(name, func(t *testing.T) {
			poolPath := csitest.Tmpfs(t, 64*MiB, 0)
			e := newEnvPool(t, csitest.Pool{Name: poolName, Path: poolPath, ReservedBytes: headroom}, extra...)
			v := e.create("pvc-reserved", 16*MiB, nil)

			reserved := int64(0)
			if aware {
				reserved = 16 * MiB
			}
			free, _ := statfs(t, poolPath)
			if a, _ := getCapacity(t, e, capacityRequest(node)); a != free-headroom-reserved {
				t.Errorf("after creating a 16 MiB volume: available %d; want free %d - headroom %d - reserved %d = %d",
					a, free, headroom, reserved, free-headroom-reserved)
			}

			// Write 4 MiB; once measured, only the unwritten part stays
			// reserved.
			target := filepath.Join(t.TempDir(), "mount")
			e.publish(csitest.PublishRequest(v.GetVolumeId(), target, v.GetVolumeContext()))
			defer e.unpublish("pvc-reserved", target)
			writeFile(t, filepath.Join(target, "data"), 4*MiB)
			stats, err := e.c.NodeGetVolumeStats(ctx(t), &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-reserved", VolumePath: target})
			if err != nil {
				t.Fatal(err)
			}
			used := usage(t, stats, csi.VolumeUsage_BYTES).GetUsed()
			if aware {
				reserved = 16*MiB - used
			}
			free, _ = statfs(t, poolPath)
			offered, _ := getCapacity(t, e, capacityRequest(node))
			if offered != free-headroom-reserved {
				t.Errorf("after writing %d bytes: available %d; want free %d - headroom %d - reserved %d = %d",
					used, offered, free, headroom, reserved, free-headroom-reserved)
			}
			// A request that fits the free space but not the reservations.
			size := free - headroom - reserved/2
			_, err = e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-second", node, size, csitest.PoolParams(poolName)))
			if aware {
				grpctest.WantCode(t, err, codes.ResourceExhausted, "reserved by volumes")
			} else if err != nil {
				t.Errorf("without reservation awareness a %d byte volume fits %d free bytes: %v", size, free-headroom, err)
			}
		})
	}
}
