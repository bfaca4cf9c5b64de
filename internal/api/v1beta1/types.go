package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostPathProvisioner is the one resource that installs and runs hpp.
//
// Cluster-scoped, one per cluster (the webhook refuses a second one).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hostpathprovisioners,scope=Cluster
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostPathProvisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostPathProvisionerSpec   `json:"spec,omitempty"`
	Status HostPathProvisionerStatus `json:"status,omitempty"`
}

// HostPathProvisionerList is a list of HostPathProvisioner.
//
// +kubebuilder:object:root=true
type HostPathProvisionerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostPathProvisioner `json:"items"`
}

// HostPathProvisionerSpec is the desired state. Exactly one of pathConfig
// (the legacy, pre-CSI provisioner) and storagePools (the CSI driver) is set.
//
// The rule is in the CRD so it holds even while the webhook is unreachable.
// +kubebuilder:validation:XValidation:rule="has(self.pathConfig) != (has(self.storagePools) && size(self.storagePools) > 0)",message="exactly one of spec.pathConfig and spec.storagePools must be set"
type HostPathProvisionerSpec struct {
	// ImagePullPolicy is the pull policy of every container the operator creates.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never;""
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// PathConfig runs the legacy provisioner (hostPath PVs) on one directory
	// per node. Deprecated: use storagePools.
	// +optional
	PathConfig *PathConfig `json:"pathConfig,omitempty"`
	// Workload restricts the nodes every pod the operator creates runs on.
	// +optional
	Workload NodePlacement `json:"workload,omitempty"`
	// FeatureGates lists enabled features; known: Snapshotting.
	// +listType=set
	// +optional
	FeatureGates []string `json:"featureGates,omitempty"`
	// StoragePools are the CSI driver's pools.
	//
	// The CRD holds upstream's rules only (unique names and paths, name
	// length, absolute paths): the API server re-checks every item of an
	// atomic list whenever the list changes, so hpp's stricter rules here
	// would make a CR that upstream's operator ran uneditable. The webhook
	// applies them to new CRs and changed pools (ValidateUpdate ratchets).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q.name == p.name))",message="pool names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q.path == p.path))",message="pool paths must be unique"
	// +optional
	StoragePools []StoragePool `json:"storagePools,omitempty"`
	// CrossNodeClones (hpp's own field; absent or true: on) lets a clone
	// or a restore land on a node other than the one that holds its
	// source: the node plugins stream the source to each other over
	// mutual TLS (port 9447, published on each node), with certificates
	// from the operator's signer. false turns that off, as upstream's
	// driver is: a clone or restore whose source is on another node is
	// refused as it was before cross-node clones (hpp-csi answers
	// NotFound there, so the claim must be scheduled on its source's
	// node), and the operator renders none of it: no peer flags, port or
	// certificate volumes in the node plugins, no access to Nodes or
	// CertificateSigningRequests in their ClusterRole, and no peer port in
	// their SecurityContextConstraints on OpenShift. The NetworkPolicy
	// hpp-allow-ingress-to-peer is part of the operator's install
	// manifests, not of the CR's objects, and stays: it opens a port that
	// nothing listens on then. Clones of a source on the same node are
	// local either way.
	// +optional
	CrossNodeClones *bool `json:"crossNodeClones,omitempty"`
}

// PathConfig is the legacy provisioner's configuration. Deprecated.
type PathConfig struct {
	// Path is the directory on each node that holds the PV directories.
	// A trailing / (or //, .) is accepted, as upstream accepts it, and
	// cleaned where hpp uses the path: the rule is
	// internal/fieldrule.CheckPoolPath.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && self != '/'",message="must be an absolute path other than /"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="must not contain a .. element"
	// +optional
	Path string `json:"path,omitempty"`
	// UseNamingPrefix puts the claim's name in front of the PV's directory name.
	// +optional
	UseNamingPrefix bool `json:"useNamingPrefix,omitempty"`
}

// StoragePool is one place on each node where the CSI driver keeps volumes.
//
// A ReadWriteMany Block pvcTemplate is refused by the webhook and, without
// it, by the operator (InvalidSpec) rather than by a CEL rule: the rule's
// cost over an unbounded accessModes list in up to 64 pools exceeds the API
// server's budget.
type StoragePool struct {
	// Name identifies the pool in StorageClass parameter storagePool. It
	// also names the pool's volume in the DaemonSet (<name>-data-dir), hence
	// a DNS label short enough for the suffix (the webhook's rule for new
	// pools; upstream accepted any name of at most 50 bytes).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	Name string `json:"name"`
	// PVCTemplate, when set, backs the pool on each node with a PVC made from
	// this template, mounted at path.
	// +optional
	PVCTemplate *corev1.PersistentVolumeClaimSpec `json:"pvcTemplate,omitempty"`
	// Path is the pool's directory on each node; volumes live in <path>/csi.
	// Not / is the webhook's rule for new pools, no ".." element its rule
	// for every CR (no pod could mount one); a trailing / is accepted and
	// cleaned (internal/fieldrule.CheckPoolPath).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	Path string `json:"path"`
	// SnapshotPath is where snapshots of the pool's volumes are kept.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	SnapshotPath string `json:"snapshotPath,omitempty"`
	// SnapshotProvider names the snapshot implementation of the pool.
	// +optional
	SnapshotProvider string `json:"snapshotProvider,omitempty"`
	// OverlayClassName names the overlay class used for the pool's volumes.
	// +optional
	OverlayClassName string `json:"overlayClassName,omitempty"`
	// EnforceSize (hpp's own field; default false, upstream's behaviour)
	// makes every volume of the pool unable to grow past its size: each
	// volume directory gets its own project quota with a hard limit equal
	// to its capacity, so a write past it fails with "Disk quota
	// exceeded", df in the pod shows the volume's size, and offered
	// capacity counts every volume's full size (no overcommit). The pool's
	// filesystem must be XFS mounted with prjquota, or ext4 with the
	// features project and quota mounted with prjquota; a pvcTemplate pool
	// is formatted and mounted that way by the operator's mounter. A pool
	// whose filesystem cannot enforce is reported not ready, naming the
	// mount option or feature to add: never silently unenforced. Not for
	// shared (ReadWriteMany) pools.
	// +optional
	EnforceSize bool `json:"enforceSize,omitempty"`
}

// NodePlacement is where the operator's pods run.
type NodePlacement struct {
	// NodeSelector is applied to every pod the operator creates.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity is applied to every pod the operator creates.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations are added to every pod the operator creates.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}
