package render

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

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
