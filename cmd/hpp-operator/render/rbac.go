package render

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rules list exactly what each component calls (least privilege); the
// comments name the caller. test/onnode checks both ways against the audit
// log of the real node's installs: no request refused, and no permission
// left unused but those it lists with the path that needs them. "list"
// goes with every "watch": client-go's informers use streaming lists
// (WATCH with sendInitialEvents) and fall back to LIST where the API
// server does not serve them.
var (
	csiClusterRules = []rbacv1.PolicyRule{
		// csi-provisioner: provision and delete; get: the source PV of a
		// clone, and hpp-csi's peer transport (the source's PV) and its
		// sweep of uncollected copies (a PV of the copy's name).
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		// csi-provisioner (update: clone-source finalizer, rescheduling),
		// hpp-csi --check-binding-mode, its peer transport and its sweep
		// of uncollected copies (get).
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update"}},
		// csi-provisioner, hpp-csi --check-binding-mode.
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
		// csi-provisioner's event recorder: create, or patch a repeated one.
		// No nodes or CSINodes: with --node-deployment csi-provisioner takes
		// its node's topology from NodeGetInfo. No VolumeAttachments: hpp
		// has no ControllerPublishVolume, so csi-provisioner never reads them.
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	snapshotRules = []rbacv1.PolicyRule{
		// csi-snapshotter, and csi-provisioner restoring from a snapshot.
		{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotclasses", "volumesnapshots"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotcontents"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotcontents/status"}, Verbs: []string{"update", "patch"}},
	}
	csiNamespaceRules = []rbacv1.PolicyRule{
		// csi-provisioner --enable-capacity, in its own namespace only
		// (an informer, then create, update, delete).
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csistoragecapacities"}, Verbs: []string{"list", "watch", "create", "update", "delete"}},
		// csi-provisioner --capacity-ownerref-level=1: its pod, whose
		// controlling owner (the DaemonSet) it reads from ownerReferences.
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	}
	legacyClusterRules = []rbacv1.PolicyRule{
		// hpp-legacy (sig-storage-lib-external-provisioner, informers):
		// provision and delete hostPath PVs.
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"list", "watch", "create", "delete"}},
		// update: hpp-legacy selects its node for an Immediate claim that
		// asks for it; the library clears the selection to reschedule.
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"list", "watch", "update"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list", "watch"}},
		// hpp-legacy: node affinity of the PVs it makes.
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
)

func (c *Config) serviceAccount(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.labels(name)},
	}
}

func (c *Config) clusterRole(name string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: c.labels(name)},
		Rules:      rules,
	}
}

func (c *Config) clusterRoleBinding(name, sa string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: c.labels(name)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: c.Namespace}},
	}
}

func (c *Config) role(name string, rules []rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.labels(name)},
		Rules:      rules,
	}
}

func (c *Config) roleBinding(name, sa string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.labels(name)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: c.Namespace}},
	}
}
