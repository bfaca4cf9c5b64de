package hostpathprovisioner_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// Without OpenShift's API the operator finds no SCC API and never asks for
// one: not a request to security.openshift.io, no annotation, no error.
func TestNoSCCWithoutOpenShift(t *testing.T) {
	needUnserved(t, "without OpenShift's CRDs", hostpathprovisioner.ServesSCC)
	var counter testenv.Counter
	h := startWith(t, "hpp-no-openshift", options{operatorCfg: counter.Wrap(restCfg)})
	h.create(legacyCR("hpp"))
	for _, name := range []string{render.LegacyDaemonSetName, render.CSIDaemonSetName} {
		setDaemonSetReady(t, h, h.cfg.Namespace, name, 1)
	}
	waitAvailable(t, h, "hpp")
	if c, err := h.cond("hpp", hppv1.ConditionDegraded); err != nil || c.Status != "False" {
		t.Errorf("Degraded %+v, %v; want False", c, err)
	}
	for _, name := range []string{render.LegacyDaemonSetName, render.CSIDaemonSetName} {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: name}, ds); err != nil {
			t.Fatal(err)
		}
		if v, ok := ds.Spec.Template.Annotations[render.RequiredSCCAnnotation]; ok {
			t.Errorf("DaemonSet %s: pods require SCC %q off OpenShift", name, v)
		}
	}
	h.deleteAllCRs()
	for _, l := range counter.Requests() {
		if strings.Contains(l, "security.openshift.io") {
			t.Errorf("request to OpenShift's API on a cluster without it: %s", l)
		}
	}
	t.Logf("%d API requests, none to security.openshift.io", counter.Total())
}

// On OpenShift (the real SCC CRD served) the operator makes upstream's
// SCCs for the ServiceAccounts that use them, pods require them, the
// legacy one goes with a switch to pools, nothing is written in the steady
// state, and deleting the CR removes them.
func TestSCCsOnOpenShift(t *testing.T) {
	needEnv(t)
	serveOpenShift(t)
	h := startWith(t, "hpp-openshift", options{config: func(c *render.Config) { c.OpenShift = true }})
	ns := h.cfg.Namespace
	h.create(legacyCR("hpp"))
	csiSCC := waitSCC(t, h, render.CSISCCName, "system:serviceaccount:"+ns+":"+render.CSIServiceAccount)
	if !csiSCC.AllowPrivilegedContainer || !csiSCC.AllowHostDirVolumePlugin || csiSCC.AllowHostNetwork || csiSCC.AllowHostPID ||
		!slices.Equal(csiSCC.Volumes, []secv1.FSType{secv1.FSTypeHostPath, secv1.FSTypePersistentVolumeClaim, secv1.FSProjected}) ||
		!slices.Equal(csiSCC.SeccompProfiles, []string{"runtime/default"}) {
		t.Errorf("CSI SCC %+v; want privileged, host directories, hostPath/PVC/projected volumes only, RuntimeDefault seccomp", csiSCC)
	}
	legacySCC := waitSCC(t, h, render.LegacySCCName, "system:serviceaccount:"+ns+":"+render.LegacyServiceAccount)
	if legacySCC.AllowPrivilegedContainer || *legacySCC.AllowPrivilegeEscalation || !legacySCC.AllowHostDirVolumePlugin {
		t.Errorf("legacy SCC %+v; want host directories without privilege", legacySCC)
	}
	for name, scc := range map[string]string{render.CSIDaemonSetName: render.CSISCCName, render.LegacyDaemonSetName: render.LegacySCCName} {
		ds := &appsv1.DaemonSet{}
		eventually(t, "DaemonSet "+name, func() error { // applied after the SCCs
			return h.get(client.ObjectKey{Namespace: ns, Name: name}, ds)
		})
		if got := ds.Spec.Template.Annotations[render.RequiredSCCAnnotation]; got != scc {
			t.Errorf("DaemonSet %s: pods require SCC %q; want %q", name, got, scc)
		}
		setDaemonSetReady(t, h, ns, name, 1)
	}
	waitAvailable(t, h, "hpp")
	assertSteadyStateWritesNothing(t, h, "hpp")

	// Switching to pools: the legacy provisioner and its SCC go.
	h.updateCR("hpp", func(cr *hppv1.HostPathProvisioner) {
		cr.Spec.PathConfig = nil
		cr.Spec.StoragePools = []hppv1.StoragePool{{Name: "local", Path: "/var/hpvolumes"}}
	})
	h.waitGone("legacy SCC after the switch to pools", &secv1.SecurityContextConstraints{ObjectMeta: metav1.ObjectMeta{Name: render.LegacySCCName}})
	if err := h.get(client.ObjectKey{Name: render.CSISCCName}, &secv1.SecurityContextConstraints{}); err != nil {
		t.Errorf("CSI SCC after the switch: %v", err)
	}
	// A deleted SCC comes back (its owner reference makes it watched).
	if err := h.admin.Delete(h.ctx, &secv1.SecurityContextConstraints{ObjectMeta: metav1.ObjectMeta{Name: render.CSISCCName}}); err != nil {
		t.Fatal(err)
	}
	waitSCC(t, h, render.CSISCCName, "system:serviceaccount:"+ns+":"+render.CSIServiceAccount)

	h.deleteAllCRs()
	h.waitGone("CSI SCC after the CR's deletion", &secv1.SecurityContextConstraints{ObjectMeta: metav1.ObjectMeta{Name: render.CSISCCName}})
}

// An SCC of the same name that the operator did not make (no owner
// reference, not our label) is left alone by the deletion.
func TestForeignSCCIsKept(t *testing.T) {
	needEnv(t)
	serveOpenShift(t)
	foreign := &secv1.SecurityContextConstraints{ObjectMeta: metav1.ObjectMeta{Name: render.LegacySCCName}, Users: []string{"someone"}}
	h := startWith(t, "hpp-openshift-foreign", options{
		config: func(c *render.Config) { c.OpenShift = true },
		setup: func(admin client.Client) {
			if err := admin.Create(context.Background(), foreign); err != nil {
				t.Fatal(err)
			}
		},
	})
	t.Cleanup(func() { _ = h.admin.Delete(context.Background(), foreign) })
	h.create(poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"}))
	waitSCC(t, h, render.CSISCCName, "system:serviceaccount:"+h.cfg.Namespace+":"+render.CSIServiceAccount)
	// A pools CR's reconciles remove the legacy SCC only if it is ours.
	setDaemonSetReady(t, h, h.cfg.Namespace, render.CSIDaemonSetName, 1)
	waitAvailable(t, h, "hpp")
	h.deleteAllCRs()
	got := &secv1.SecurityContextConstraints{}
	if err := h.get(client.ObjectKey{Name: render.LegacySCCName}, got); err != nil || !slices.Equal(got.Users, []string{"someone"}) {
		t.Errorf("foreign SCC %s: %+v, %v; want it untouched", render.LegacySCCName, got.Users, err)
	}
}

func legacyCR(name string) *hppv1.HostPathProvisioner {
	return &hppv1.HostPathProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/var/hpvolumes"}},
	}
}

// waitSCC waits for the SCC and checks that exactly user may use it.
func waitSCC(t *testing.T, h *harness, name, user string) *secv1.SecurityContextConstraints {
	t.Helper()
	scc := &secv1.SecurityContextConstraints{}
	eventually(t, "SCC "+name, func() error {
		if err := h.get(client.ObjectKey{Name: name}, scc); err != nil {
			return err
		}
		if !slices.Equal(scc.Users, []string{user}) || len(scc.Groups) != 0 {
			return fmt.Errorf("users %v groups %v; want only %s", scc.Users, scc.Groups, user)
		}
		return nil
	})
	return scc
}

// serveOpenShift installs OpenShift's real SCC and APIServer CRDs (from the
// pinned github.com/openshift/api module) until the test ends.
func serveOpenShift(t *testing.T) {
	t.Helper()
	paths, err := testenv.OpenShiftCRDPaths()
	if err != nil {
		t.Fatal(err)
	}
	opts := envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}
	eventually(t, "install OpenShift's CRDs", func() error { // an earlier test's copy may still be terminating
		_, err := envtest.InstallCRDs(restCfg, opts)
		return err
	})
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(restCfg, opts); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstall OpenShift's CRDs: %v", err)
		}
		// Gone before the next test, which must not find them served.
		waitServed(t, "OpenShift's CRDs gone", hostpathprovisioner.ServesSCC, false)
	})
	waitServed(t, "SCC API served", hostpathprovisioner.ServesSCC, true)
}
