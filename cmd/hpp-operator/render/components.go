package render

import (
	"github.com/hostpath-provisioner/hpp/internal/contract"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Objects of the kustomize components for installs without the operator
// (deploy/components, written by gendeploy). The operator makes the same
// permissions itself, folded into the node ClusterRole.

// SnapshotClassName is the example VolumeSnapshotClass of
// deploy/components/snapshots.
const SnapshotClassName = "hostpath-csi-snapshots"

// SnapshotterObjects are what csi-snapshotter needs beside the CSI
// DaemonSet: its permissions, in a ClusterRole of their own so that the
// component adds them without editing the base's, and an example
// VolumeSnapshotClass (unstructured: hpp does not link the snapshot API's
// types for one object).
func (c *Config) SnapshotterObjects() []client.Object {
	name := CSIServiceAccount + "-snapshots"
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion":     "snapshot.storage.k8s.io/v1",
		"kind":           "VolumeSnapshotClass",
		"metadata":       map[string]any{"name": SnapshotClassName, "labels": toAny(c.labels(SnapshotClassName))},
		"driver":         contract.DriverName,
		"deletionPolicy": "Delete",
	}}
	return []client.Object{
		c.clusterRole(name, snapshotRules),
		c.clusterRoleBinding(name, CSIServiceAccount),
		class,
	}
}

// OpenShiftSCCRoleName grants the use of the CSI driver's
// SecurityContextConstraints (deploy/components/openshift).
const OpenShiftSCCRoleName = "hostpath-provisioner-csi-scc"

// OpenShiftObjects let the node pods' ServiceAccount run on OpenShift
// without the operator: the same SCC the operator makes (CSISCC), with no
// users, its `use` granted through RBAC instead and bound in the install
// namespace (a RoleBinding, so a kustomize namespace change moves its
// subject too; an SCC's users list holds the namespace inside a string).
func (c *Config) OpenShiftObjects(serviceAccount string) []client.Object {
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: OpenShiftSCCRoleName, Labels: c.labels(OpenShiftSCCRoleName)},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"},
			ResourceNames: []string{CSISCCName}, Verbs: []string{"use"}}},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: OpenShiftSCCRoleName, Namespace: c.Namespace, Labels: c.labels(OpenShiftSCCRoleName)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: OpenShiftSCCRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: c.Namespace}},
	}
	return []client.Object{c.CSISCC(), role, binding}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
