package render

import (
	"encoding/json"
	"path"

	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

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
