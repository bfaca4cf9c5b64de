package provisioner

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

type pvParams struct {
	name, path     string
	node, hostname string
	claim          *v1.PersistentVolumeClaim
	class          *storagev1.StorageClass
}

// buildPV returns the PV for a provisioned directory. It copies what it
// takes from the claim and class (they come from informer caches). The
// library adds the claimRef, storage class name, and provisioned-by
// annotation.
func buildPV(p pvParams) *v1.PersistentVolume {
	reclaim := v1.PersistentVolumeReclaimDelete
	if p.class.ReclaimPolicy != nil {
		reclaim = *p.class.ReclaimPolicy
	}
	modes := append([]v1.PersistentVolumeAccessMode(nil), p.claim.Spec.AccessModes...)
	if len(modes) == 0 {
		modes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	// Directory, not DirectoryOrCreate: if the pool disk is not mounted the
	// pod must fail instead of writing into a fresh directory on the OS disk.
	hostPathType := v1.HostPathDirectory
	fsMode := v1.PersistentVolumeFilesystem
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name,
			Annotations: map[string]string{
				contract.AnnIdentity:        contract.LegacyProvisionerName,
				contract.AnnProvisionOnNode: p.node,
			},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   modes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: p.claim.Spec.Resources.Requests[v1.ResourceStorage].DeepCopy()},
			VolumeMode:                    &fsMode,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: p.path, Type: &hostPathType},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{p.hostname},
				}}}},
			}},
		},
	}
}
