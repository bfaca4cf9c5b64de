package render

import (
	"encoding/json"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// This file is every host directory hpp-csi's node pod reaches (pools, a
// pathConfig CR's directory, snapshot areas) and the --datadir JSON that
// tells hpp-csi where each appears in its container: the mounts and the
// JSON are made from the same CR, side by side, so they cannot disagree.

// withDataDirs adds the mounts of the CR's data directories: each pool's,
// a pathConfig CR's, and the snapshot areas outside their pools.
func withDataDirs(spec *hppv1.HostPathProvisionerSpec, mounts []corev1.VolumeMount, volumes []corev1.Volume) ([]corev1.VolumeMount, []corev1.Volume) {
	h2c := corev1.MountPropagationHostToContainer
	for _, p := range spec.StoragePools {
		mounts = append(mounts, corev1.VolumeMount{Name: poolVolume(p.Name), MountPath: poolMount(p.Name), MountPropagation: &h2c})
		volumes = append(volumes, hostPathVolume(poolVolume(p.Name), p.Path, corev1.HostPathDirectoryOrCreate))
	}
	mounts, volumes = withPathConfigMount(spec, mounts, volumes)
	return snapshotMounts(spec.StoragePools, mounts, volumes)
}

// poolMount is where a pool's host directory appears in the driver's
// container, as upstream's operator mounts it: hpp-csi's pool path is the
// mount's csi/ subdirectory, so volumes land in <host pool path>/csi.
func poolMount(pool string) string { return "/" + poolVolume(pool) }

// Datadir returns hpp-csi's --datadir JSON for the CR's pools: a list of
// pool.Pool, the one type of that format (hpp-csi parses it back with
// pool.Parse). Mounted marks a pvcTemplate pool, which hpp-csi uses only
// while hpp-mounter's marker is there (cmd/hpp-mounter/README.md).
func Datadir(pools []hppv1.StoragePool) (string, error) {
	out := make([]pool.Pool, 0, len(pools))
	for _, p := range pools {
		d := pool.Pool{Name: p.Name, Path: path.Join(poolMount(p.Name), "csi"),
			SnapshotPath: datadirSnapshotPath(p), SnapshotProvider: p.SnapshotProvider, EnforceSize: p.EnforceSize}
		if p.PVCTemplate != nil {
			d.Mounted = true
			for _, m := range p.PVCTemplate.AccessModes {
				d.Shared = d.Shared || m == corev1.ReadWriteMany
			}
		}
		out = append(out, d)
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// A pathConfig CR's directory is the legacy provisioner's PV_DIR. hpp-csi
// serves it as the pool "legacy" (contract.DefaultPool: the pool a
// StorageClass without storagePool gets), with its CSI volumes in <path>/csi as upstream lays a
// pool out, and with legacyPath <path>: the PVs hpp-migrate moves onto the
// CSI driver keep their directories <path>/<dir> and hpp-csi serves them
// there (cmd/hpp-migrate/README.md, "Contract with hpp-csi"). The
// directory is mounted at the same path as on the host, as the legacy
// DaemonSet does, so legacyPath is literally pathConfig.path.

// datadirOf is hpp-csi's --datadir for a CR of either kind.
func datadirOf(spec *hppv1.HostPathProvisionerSpec) (string, error) {
	pc := spec.PathConfig
	if pc == nil {
		return Datadir(spec.StoragePools)
	}
	b, err := json.Marshal([]pool.Pool{{Name: contract.DefaultPool, Path: path.Join(pc.Path, "csi"), LegacyPath: pc.Path}})
	return string(b), err
}

// withPathConfigMount adds a pathConfig CR's directory to hpp-csi's mounts.
func withPathConfigMount(spec *hppv1.HostPathProvisionerSpec, mounts []corev1.VolumeMount, volumes []corev1.Volume) ([]corev1.VolumeMount, []corev1.Volume) {
	pc := spec.PathConfig
	if pc == nil {
		return mounts, volumes
	}
	h2c := corev1.MountPropagationHostToContainer
	name := poolVolume(contract.DefaultPool)
	return append(mounts, corev1.VolumeMount{Name: name, MountPath: pc.Path, MountPropagation: &h2c}),
		append(volumes, hostPathVolume(name, pc.Path, corev1.HostPathDirectoryOrCreate))
}

// defaultSnapshotDir is a pool's snapshot area when the CR names none:
// inside the volumes directory, as the KubeVirt operator lays it out
// (hpp-csi sets that name aside: it is never a volume), so on the pool's
// filesystem, where reflinks work.
const defaultSnapshotDir = "snapshots"

// snapshotMount is where a pool's snapshotPath outside the pool's
// directory appears in the driver's container.
func snapshotMount(pool string) string { return "/" + pool + "-snapshot-dir" }

func snapshotVolume(pool string) string { return pool + "-snapshot-dir" }

// datadirSnapshotPath is the pool's snapshot area as hpp-csi sees it in its
// container, "" when the pool takes no snapshots (no snapshotProvider). The
// CR's snapshotPath is a host path: inside the pool's directory it is
// reached through the pool's mount, elsewhere through a mount of its own
// (snapshotHostPath).
func datadirSnapshotPath(p hppv1.StoragePool) string {
	switch {
	case p.SnapshotProvider == "":
		return ""
	case p.SnapshotPath == "":
		return path.Join(poolMount(p.Name), "csi", defaultSnapshotDir)
	case strings.HasPrefix(p.SnapshotPath, p.Path+"/"):
		return path.Join(poolMount(p.Name), strings.TrimPrefix(p.SnapshotPath, p.Path))
	}
	return snapshotMount(p.Name)
}

// snapshotHostPath returns the host directory to mount for the pool's
// snapshots when its snapshotPath is outside the pool's directory.
func snapshotHostPath(p hppv1.StoragePool) (string, bool) {
	if p.SnapshotProvider == "" || p.SnapshotPath == "" || strings.HasPrefix(p.SnapshotPath, p.Path+"/") {
		return "", false
	}
	return p.SnapshotPath, true
}

// snapshotMounts adds the mounts of the pools' snapshot directories that
// lie outside their pools.
func snapshotMounts(pools []hppv1.StoragePool, mounts []corev1.VolumeMount, volumes []corev1.Volume) ([]corev1.VolumeMount, []corev1.Volume) {
	h2c := corev1.MountPropagationHostToContainer
	for _, p := range pools {
		if host, ok := snapshotHostPath(p); ok {
			mounts = append(mounts, corev1.VolumeMount{Name: snapshotVolume(p.Name), MountPath: snapshotMount(p.Name), MountPropagation: &h2c})
			volumes = append(volumes, hostPathVolume(snapshotVolume(p.Name), host, corev1.HostPathDirectoryOrCreate))
		}
	}
	return mounts, volumes
}

func hostPathVolume(name, p string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: p, Type: ptr.To(t)}}}
}
