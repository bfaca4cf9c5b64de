package render

import (
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// CSIDriver is the driver's registration object. Its spec is cluster-wide
// and partly immutable, so the reconciler compares before it applies.
func (c *Config) CSIDriver() *storagev1.CSIDriver {
	fsGroup := storagev1.FileFSGroupPolicy
	return &storagev1.CSIDriver{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		ObjectMeta: metav1.ObjectMeta{Name: contract.DriverName, Labels: c.labels(CSIDaemonSetName)},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:  ptr.To(false),
			PodInfoOnMount:  ptr.To(true),
			StorageCapacity: ptr.To(true),
			FSGroupPolicy:   &fsGroup,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{
				storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral,
			},
		},
	}
}

// CSIObjects are the objects of the CSI driver, in apply order (identities
// and permissions before the pods that use them), csi-resizer's
// (resizer.go) last.
func (c *Config) CSIObjects(spec *hppv1.HostPathProvisionerSpec) ([]client.Object, error) {
	ds, err := c.CSIDaemonSet(spec)
	if err != nil {
		return nil, err
	}
	rules := slices.Clone(csiClusterRules)
	if c.PeerTransport {
		rules = append(rules, peerClusterRules...)
	}
	if spec.HasFeature(hppv1.FeatureSnapshotting) {
		rules = append(rules, snapshotRules...)
	}
	objs := []client.Object{
		c.serviceAccount(CSIServiceAccount),
		c.clusterRole(CSIServiceAccount, rules),
		c.clusterRoleBinding(CSIServiceAccount, CSIServiceAccount),
		c.role(CSIServiceAccount, csiNamespaceRules),
		c.roleBinding(CSIServiceAccount, CSIServiceAccount),
		c.CSIDriver(),
		ds,
	}
	return append(objs, c.ResizerObjects(spec)...), nil
}

// LegacyObjects are the objects of the legacy provisioner, in apply order.
func (c *Config) LegacyObjects(spec *hppv1.HostPathProvisionerSpec) []client.Object {
	return []client.Object{
		c.serviceAccount(LegacyServiceAccount),
		c.clusterRole(LegacyDaemonSetName, legacyClusterRules),
		c.clusterRoleBinding(LegacyDaemonSetName, LegacyServiceAccount),
		c.LegacyDaemonSet(spec),
	}
}
