package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostPathProvisionerStatus is the observed state.
type HostPathProvisionerStatus struct {
	// Conditions: Available, Progressing, Degraded.
	// +listType=atomic
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// OperatorVersion is the version of the operator that wrote this status.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// TargetVersion is the version being rolled out.
	// +optional
	TargetVersion string `json:"targetVersion,omitempty"`
	// ObservedVersion is the version that is fully rolled out.
	// +optional
	ObservedVersion string `json:"observedVersion,omitempty"`
	// StoragePoolStatuses is one entry per pool.
	// +listType=atomic
	// +optional
	StoragePoolStatuses []StoragePoolStatus `json:"storagePoolStatuses,omitempty"`
	// StrandedVolumes lists, per node, the hpp volumes whose node was
	// deleted or has been NotReady past the grace period (an hpp addition,
	// written by the operator's node-loss controller; see the operator's
	// README, "When a node goes away").
	// +listType=atomic
	// +optional
	StrandedVolumes []StrandedNode `json:"strandedVolumes,omitempty"`
}

// StrandedReason says why a node's volumes are stranded.
type StrandedReason string

const (
	// StrandedNodeDeleted: the Node object is gone.
	StrandedNodeDeleted StrandedReason = "NodeDeleted"
	// StrandedNodeNotReady: the node has been NotReady past the grace
	// period. Reported only: hpp releases nothing on a node that still
	// exists.
	StrandedNodeNotReady StrandedReason = "NodeNotReady"
)

// StrandedNode is one lost node and the volumes that live on its disk.
type StrandedNode struct {
	Node   string         `json:"node"`
	Reason StrandedReason `json:"reason"`
	// Since is when hpp first saw the Node deleted, or when its Ready
	// condition last changed.
	Since metav1.Time `json:"since"`
	// Count is the number of volumes on the node; Volumes lists at most
	// 100 of them.
	Count int `json:"count"`
	// +listType=atomic
	// +optional
	Volumes []StrandedVolume `json:"volumes,omitempty"`
}

// StrandedVolume is one volume on a lost node and what hpp does with it.
type StrandedVolume struct {
	PersistentVolume string `json:"persistentVolume"`
	// Claim is the bound claim as namespace/name ("" when none).
	// +optional
	Claim string `json:"claim,omitempty"`
	// Pool is the volume's storage pool ("" for a legacy volume).
	// +optional
	Pool string `json:"pool,omitempty"`
	// Action: Kept (not opted in to release), Waiting (opted in; released
	// at ReleaseAt), InUse (opted in, but a running pod uses the claim),
	// Releasing (the claim is being deleted), Removing (the orphaned PV is
	// being removed).
	Action string `json:"action"`
	// +optional
	ReleaseAt *metav1.Time `json:"releaseAt,omitempty"`
}

// ConditionType is one of the condition types below.
type ConditionType string

// The condition types the operator reports (upstream's names).
const (
	ConditionAvailable   ConditionType = "Available"
	ConditionProgressing ConditionType = "Progressing"
	ConditionDegraded    ConditionType = "Degraded"
	// ConditionSpecWarning (hpp's) is True while the spec holds values that
	// upstream's operator accepted and hpp runs, but refuses in a new CR or
	// a changed field (reason StricterRulesOnChange, the fields in the
	// message); absent otherwise.
	ConditionSpecWarning ConditionType = "SpecWarning"
)

// Condition has the fields of upstream's condition type (OpenShift's
// custom-resource-status) plus observedGeneration. hpp never writes
// lastHeartbeatTime: a timestamp that changes on every reconcile would turn
// every reconcile into a status write.
type Condition struct {
	Type   ConditionType          `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// StoragePoolPhase is the phase of a pool.
type StoragePoolPhase string

// Upstream's pool phases.
const (
	StoragePoolPreparing StoragePoolPhase = "Preparing"
	StoragePoolMounting  StoragePoolPhase = "Mounting"
	StoragePoolReady     StoragePoolPhase = "Ready"
)

// StoragePoolStatus is one pool's state.
type StoragePoolStatus struct {
	Name  string           `json:"name"`
	Phase StoragePoolPhase `json:"phase"`
	// DesiredReady is the number of nodes the pool should be ready on.
	// +optional
	DesiredReady int `json:"desiredReady,omitempty"`
	// CurrentReady is the number of nodes the pool is ready on.
	// +optional
	CurrentReady int `json:"currentReady,omitempty"`
	// ClaimStatuses is the state of each per-node PVC of a pvcTemplate pool.
	// +listType=atomic
	// +optional
	ClaimStatuses []ClaimStatus `json:"claimStatuses,omitempty"`
	// Nodes is the pool's state on each node: for a pvcTemplate pool every
	// node it should be mounted on, for a directory pool the nodes where it
	// is not ready (an hpp addition).
	// +listType=atomic
	// +optional
	Nodes []PoolNodeStatus `json:"nodes,omitempty"`
}

// ClaimStatus is the state of one per-node PVC of a pool.
type ClaimStatus struct {
	Name   string                             `json:"name"`
	Status corev1.PersistentVolumeClaimStatus `json:"status"`
}

// PoolNodeStatus is a pool's readiness on one node.
type PoolNodeStatus struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	// Phase of the pool on this node. A pvcTemplate pool: Preparing (its
	// PVC is not bound yet), Mounting (bound, the mounter is not ready),
	// Ready. A directory pool: Ready while hpp-csi's pod there is ready,
	// else Preparing.
	// +optional
	Phase StoragePoolPhase `json:"phase,omitempty"`
	// Claim is the pool PVC the node's mounter uses, ClaimPhase its phase.
	// +optional
	Claim string `json:"claim,omitempty"`
	// +optional
	ClaimPhase corev1.PersistentVolumeClaimPhase `json:"claimPhase,omitempty"`
	// MounterReady: the mounter reports the pool mounted and marked.
	// +optional
	MounterReady bool `json:"mounterReady,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
}
