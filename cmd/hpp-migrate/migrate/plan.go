package migrate

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// State of a legacy PV in a plan.
type State string

const (
	StateReady       State = "Ready"       // can be migrated now
	StateBlocked     State = "Blocked"     // cannot be migrated; Reasons say why
	StateInterrupted State = "Interrupted" // a migration stopped half-way; `migrate` finishes it
	StateMigrated    State = "Migrated"    // already a CSI PV
)

// Item is one PV of a plan.
type Item struct {
	PV           string   `json:"pv"`
	Claim        string   `json:"claim,omitempty"` // namespace/name
	ClaimUID     string   `json:"claimUID,omitempty"`
	Node         string   `json:"node,omitempty"`
	Directory    string   `json:"directory,omitempty"` // the hostPath path
	Size         string   `json:"size,omitempty"`
	StorageClass string   `json:"storageClass,omitempty"`
	Pods         []string `json:"pods,omitempty"` // namespace/name of pods using the claim
	// VolumeHandle is the CSI PV's volume handle (the directory's name).
	VolumeHandle string   `json:"volumeHandle,omitempty"`
	NamingPrefix bool     `json:"namingPrefix,omitempty"`
	State        State    `json:"state"`
	Reasons      []string `json:"reasons,omitempty"`

	// Original is the legacy PV: the live object, or the backup when the
	// live one is already gone or changed by an interrupted run.
	Original *corev1.PersistentVolume `json:"-"`
	// Live is the PV as listed (nil when gone).
	Live *corev1.PersistentVolume `json:"-"`
	// Want is the CSI PV it becomes (nil when Blocked), with its final
	// reclaim policy.
	Want *corev1.PersistentVolume `json:"csiPV,omitempty"`
}

// ClassItem is a legacy StorageClass and its CSI counterpart.
type ClassItem struct {
	Legacy string `json:"legacy"`
	CSI    string `json:"csi"`
	// State is Create (missing), Exists (a matching class is there) or
	// Conflict (a class of that name is not the counterpart; never edited).
	State  string                  `json:"state"`
	Reason string                  `json:"reason,omitempty"`
	Object *storagev1.StorageClass `json:"object,omitempty"`
}

// Plan is what `plan` shows and `migrate` executes.
type Plan struct {
	PVDir          string      `json:"pvDir"`
	Pool           string      `json:"storagePool"`
	Items          []Item      `json:"volumes"`
	StorageClasses []ClassItem `json:"storageClasses"`
}

// Count returns how many items are in state s.
func (p *Plan) Count(s State) int {
	n := 0
	for _, it := range p.Items {
		if it.State == s {
			n++
		}
	}
	return n
}
