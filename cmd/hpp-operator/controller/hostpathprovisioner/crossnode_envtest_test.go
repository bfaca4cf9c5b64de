package hostpathprovisioner_test

import (
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestCrossNodeClonesFollowTheCR: with the operator's peer transport on,
// spec.crossNodeClones false rolls the node plugins without it (no peer
// flag, no host port, no Nodes or CertificateSigningRequests in their
// ClusterRole), and removing the field brings it back, both ways on the
// live objects. The real CRD stores the field as given (not pruned) and
// does not default it: a CR without it stays without it, as upstream's.
func TestCrossNodeClonesFollowTheCR(t *testing.T) {
	h := startWith(t, "hpp-cross-node", options{config: func(cfg *render.Config) { cfg.PeerTransport = true }})
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"})
	cr.Spec.CrossNodeClones = ptr.To(false)
	h.create(cr)
	stored := func(want *bool) {
		t.Helper()
		cur := &hppv1.HostPathProvisioner{}
		if err := h.get(client.ObjectKey{Name: "hpp"}, cur); err != nil {
			t.Fatal(err)
		}
		if got := cur.Spec.CrossNodeClones; (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("stored spec.crossNodeClones %v, want %v", ptr.Deref(got, true), want)
		}
	}
	stored(ptr.To(false))
	waitPeer(t, h, false)
	h.updateCR("hpp", func(cur *hppv1.HostPathProvisioner) { cur.Spec.CrossNodeClones = nil })
	waitPeer(t, h, true)
	stored(nil)
	h.updateCR("hpp", func(cur *hppv1.HostPathProvisioner) { cur.Spec.CrossNodeClones = ptr.To(false) })
	waitPeer(t, h, false)
}

// waitPeer waits until the node plugins' DaemonSet and ClusterRole have
// the peer transport (on) or lack every part of it.
func waitPeer(t *testing.T, h *harness, on bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("peer transport %v in the DaemonSet and ClusterRole", on), func() error {
		ds := h.csiDaemonSet()
		drv := ds.Spec.Template.Spec.Containers[0]
		addr, hasAddr := argValue(drv.Args, "--peer-address")
		_, hasBundle := argValue(drv.Args, "--peer-ca-bundle")
		hostPort := false
		for _, p := range drv.Ports {
			hostPort = hostPort || p.HostPort == render.PeerPort
		}
		vols := 0
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == render.PeerCABundleName || v.EmptyDir != nil {
				vols++
			}
		}
		cr := &rbacv1.ClusterRole{}
		if err := h.get(client.ObjectKey{Name: render.CSIServiceAccount}, cr); err != nil {
			return err
		}
		nodes := hasRule(cr.Rules, "", "nodes", "get")
		csrs := hasRule(cr.Rules, "certificates.k8s.io", "certificatesigningrequests", "create")
		if hasAddr != on || hasBundle != on || hostPort != on || (vols == 2) != on || nodes != on || csrs != on {
			return fmt.Errorf("--peer-address %v (%q), --peer-ca-bundle %v, hostPort %d %v, peer volumes %d, get nodes %v, create CSRs %v",
				hasAddr, addr, hasBundle, render.PeerPort, hostPort, vols, nodes, csrs)
		}
		return nil
	})
}
