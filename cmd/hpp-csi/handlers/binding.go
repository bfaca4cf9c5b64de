package handlers

import (
	"context"
)

// BindingModes looks up how a claim's StorageClass binds. It needs the
// Kubernetes API, which the driver otherwise never talks to, so it is
// optional (--check-binding-mode).
type BindingModes interface {
	// ImmediateClass returns the claim's StorageClass and whether it uses
	// volumeBindingMode Immediate.
	ImmediateClass(ctx context.Context, namespace, claim string) (class string, immediate bool, err error)
}

// Set by csi-provisioner's --extra-create-metadata.
const (
	paramPVCName      = "csi.storage.k8s.io/pvc/name"
	paramPVCNamespace = "csi.storage.k8s.io/pvc/namespace"
)
