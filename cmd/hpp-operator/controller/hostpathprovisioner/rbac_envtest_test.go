package hostpathprovisioner_test

import (
	"path/filepath"
	"testing"

	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestOperatorRunsWithItsOwnRBAC runs the operator as its ServiceAccount
// with exactly the permissions of deploy/base/operator/rbac.yaml (the real
// API server's RBAC, escalation checks included) through install, status,
// switch and deletion, and requires that no request was refused.
func TestOperatorRunsWithItsOwnRBAC(t *testing.T) {
	needEnv(t)
	const ns = "hostpath-provisioner" // the namespace rbac.yaml names
	var counter testenv.Counter
	asOperator := rest.CopyConfig(restCfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":hostpath-provisioner-operator"}
	// With prometheus-operator's and OpenShift's APIs served, so that the
	// monitoring objects, their RBAC and the SCCs go through the same checks.
	h := startWith(t, ns, options{operatorCfg: counter.Wrap(asOperator), setup: func(admin client.Client) {
		servePrometheusOperator(t, admin)
		serveOpenShift(t)
		for _, u := range testenv.ReadManifests(t, filepath.Join(testenv.RepoRoot(), "deploy", "base", "operator", "rbac.yaml")) {
			if err := admin.Create(t.Context(), u); err != nil {
				t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}, config: func(cfg *render.Config) {
		// And the peer transport, as the operator renders it: the node
		// plugin's ClusterRole with nodes and certificate requests.
		cfg.PrometheusOperator, cfg.OpenShift, cfg.PeerTransport = true, true, true
	}})
	// A node and a shared pvcTemplate pool: claims, mounters, the overlay
	// StorageClass and, on the switch below, a cleanup Job.
	addNode(t, h, "rbac-node", nil)
	t.Cleanup(func() {
		_ = h.admin.Delete(h.ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: render.DefaultOverlayClassName}})
	})
	h.create(poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"},
		hppv1.StoragePool{Name: "nfs", Path: "/var/nfs", PVCTemplate: template(corev1.PersistentVolumeFilesystem, corev1.ReadWriteMany)}))
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, 1)
	h.playMounterReady("nfs", "rbac-node")
	waitAvailable(t, h, "hpp")
	waitSCC(t, h, render.CSISCCName, "system:serviceaccount:"+ns+":"+render.CSIServiceAccount)
	if err := h.get(client.ObjectKey{Name: render.DefaultOverlayClassName}, &storagev1.StorageClass{}); err != nil {
		t.Errorf("overlay StorageClass: %v", err)
	}
	eventually(t, "switch to pathConfig", func() error {
		cur := &hppv1.HostPathProvisioner{}
		if err := h.get(client.ObjectKey{Name: "hpp"}, cur); err != nil {
			return err
		}
		cur.Spec.StoragePools = nil
		cur.Spec.PathConfig = &hppv1.PathConfig{Path: "/var/hpvolumes"}
		return h.admin.Update(h.ctx, cur)
	})
	eventually(t, "legacy DaemonSet created", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.LegacyDaemonSetName}, &appsv1.DaemonSet{})
	})
	h.waitGone("mounter", deployment(ns, render.MounterName("nfs", "rbac-node")))
	h.finishJob(render.CleanupJobName("nfs", "rbac-node"), true)
	waitSCC(t, h, render.LegacySCCName, "system:serviceaccount:"+ns+":"+render.LegacyServiceAccount)
	h.waitGone("cleanup Job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: render.CleanupJobName("nfs", "rbac-node")}})
	h.deleteAllCRs()
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.LegacyDaemonSetName}, &appsv1.DaemonSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("legacy DaemonSet after deletion: %v", err)
	}
	h.waitGone("CSI SCC", &secv1.SecurityContextConstraints{ObjectMeta: metav1.ObjectMeta{Name: render.CSISCCName}})
	if f := counter.Forbidden(); len(f) > 0 {
		t.Errorf("the operator's RBAC (deploy/base/operator/rbac.yaml) refused %d request(s):\n%v", len(f), f)
	}
	t.Logf("operator as its ServiceAccount: %d requests, 0 refused", counter.Total())
}
