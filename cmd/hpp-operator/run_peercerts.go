package main

import (
	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/peercerts"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// addPeerSigner runs the signer in mgr when the node plugins take part in
// cross-node clones (render.Config.PeerTransport). It keeps running while
// the CR's spec.crossNodeClones is false: the CR may turn them back on at
// any time (a manager's controllers are fixed at its start), and the node
// plugins then find the CA bundle already published; meanwhile it signs
// nothing, as their ClusterRole lacks the create of
// CertificateSigningRequests and it signs only their ServiceAccount's.
func addPeerSigner(mgr ctrl.Manager, cfg render.Config, log logr.Logger) error {
	if !cfg.PeerTransport {
		return nil
	}
	return peerSigner(mgr, cfg, log).SetupWithManager(mgr)
}

// peerSigner is the signer of hpp-csi's peer certificates: its CA and the
// bundle the node DaemonSet mounts live in the operator's namespace (where
// render puts the DaemonSet, so the ConfigMap volume finds the bundle),
// and it signs requests of the CSI node plugin's service account only.
func peerSigner(mgr ctrl.Manager, cfg render.Config, log logr.Logger) *peercerts.Reconciler {
	return &peercerts.Reconciler{
		Client:         mgr.GetClient(),
		Namespace:      cfg.Namespace,
		ServiceAccount: cfg.PeerServiceAccountUser(),
		Labels:         cfg.PeerCALabels(),
		Log:            log.WithName("peer-signer"),
	}
}
