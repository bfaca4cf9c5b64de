package csitest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Volume context keys and on-disk names the tests assert (the contract's
// names are in internal/contract).
const (
	EphemeralKey    = "csi.storage.k8s.io/ephemeral"
	PodUIDKey       = "csi.storage.k8s.io/pod.uid"
	DirectoryUID    = "directoryUID"
	DirectoryGID    = "directoryGID"
	DirectoryMode   = "directoryMode"
	VolumesSubdir   = "csi"
	RecordsDir      = ".hpp-records"
	StagingDir      = ".hpp-staging"
	TrashDir        = ".hpp-trash"
	DefaultNodeName = "node-a"
)

// Segment is node's topology segment.
func Segment(node string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{contract.TopologyKey: node}}
}

// Topology is what csi-provisioner sends for WaitForFirstConsumer: the
// selected node, requisite and preferred.
func Topology(node string) *csi.TopologyRequirement {
	return &csi.TopologyRequirement{Requisite: []*csi.Topology{Segment(node)}, Preferred: []*csi.Topology{Segment(node)}}
}

// MountCapability is a filesystem volume capability with the access mode
// and mount flags.
func MountCapability(mode csi.VolumeCapability_AccessMode_Mode, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// RWO is the usual ReadWriteOnce capability.
func RWO() *csi.VolumeCapability {
	return MountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
}

// CreateRequest asks node for a volume of bytes in the pool named by params.
func CreateRequest(name, node string, bytes int64, params map[string]string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:                      name,
		CapacityRange:             &csi.CapacityRange{RequiredBytes: bytes},
		VolumeCapabilities:        []*csi.VolumeCapability{RWO()},
		Parameters:                params,
		AccessibilityRequirements: Topology(node),
	}
}

// PublishRequest publishes id read-write at target.
func PublishRequest(id, target string, volumeContext map[string]string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:         id,
		TargetPath:       target,
		VolumeCapability: RWO(),
		VolumeContext:    volumeContext,
	}
}

// PoolParams returns StorageClass parameters selecting the pool name.
func PoolParams(name string) map[string]string {
	return map[string]string{contract.ParamStoragePool: name}
}

// Purged waits until the trash of the volumes directory root is empty and
// returns what is still there after 30s. hpp-csi's DeleteVolume returns once
// the volume is durably out of the pool; the trash is emptied in the
// background (and by Recover at the next start).
func Purged(root string) []string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, err := os.ReadDir(filepath.Join(root, TrashDir))
		if err != nil && !os.IsNotExist(err) {
			return []string{err.Error()}
		}
		if len(entries) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for _, e := range entries {
				left = append(left, e.Name())
			}
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Entries lists dir's names, hidden ones included, in directory order.
func Entries(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}
