package hostpathprovisioner_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// A stored CR that upstream's CRD and webhook accepted and its operator ran
// (nested pool paths, a feature gate hpp does not know), which hpp refuses
// in a new CR, keeps being reconciled (a trailing '/' hpp accepts too): the DaemonSet is applied
// with its pools, the CR becomes Available, nothing is Degraded, and the
// SpecWarning condition names each value hpp would refuse on a change.
// Fixing the values clears the warning.
func TestUpstreamAcceptedCRKeepsRunning(t *testing.T) {
	h := start(t, "hpp-ratchet")
	ns := h.cfg.Namespace
	cr := poolsCR("hpp",
		hppv1.StoragePool{Name: "local", Path: "/var/hpp"},
		hppv1.StoragePool{Name: "inner", Path: "/var/hpp/inner"},
		hppv1.StoragePool{Name: "slash", Path: "/srv/pool/"})
	cr.Spec.FeatureGates = []string{"SomeUpstreamGate"}
	if len(hppv1.ValidateSpec(&cr.Spec)) != 2 {
		t.Fatalf("fixture: hpp should refuse it as a new CR: %v", hppv1.ValidateSpec(&cr.Spec))
	}
	if err := h.admin.Create(h.ctx, cr); err != nil {
		t.Fatalf("the CRD refuses what upstream's accepts: %v", err)
	}
	ds := &appsv1.DaemonSet{}
	eventually(t, "CSI DaemonSet applied", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds)
	})
	paths := map[string]bool{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			paths[v.HostPath.Path] = true
		}
	}
	for _, p := range []string{"/var/hpp", "/var/hpp/inner", "/srv/pool/"} {
		if !paths[p] {
			t.Errorf("DaemonSet has no hostPath %s (has %v)", p, paths)
		}
	}
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, 1)
	waitAvailable(t, h, "hpp")
	if c, err := h.cond("hpp", hppv1.ConditionDegraded); err != nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Degraded %+v, %v; want False", c, err)
	}
	warn, err := h.cond("hpp", hppv1.ConditionSpecWarning)
	if err != nil {
		t.Fatal(err)
	}
	if warn.Status != corev1.ConditionTrue || warn.Reason != "StricterRulesOnChange" {
		t.Errorf("SpecWarning %+v; want True, StricterRulesOnChange", warn)
	}
	for _, want := range []string{
		`spec.storagePools[1].path: Invalid value: "/var/hpp/inner": is inside storagePools[0].path /var/hpp: pool paths must not be nested`,
		`spec.featureGates[0]: Unsupported value: "SomeUpstreamGate"`,
	} {
		if !strings.Contains(warn.Message, want) {
			t.Errorf("SpecWarning message lacks %q:\n%s", want, warn.Message)
		}
	}
	h.waitEvent("SpecWarningTrue", "a change of these fields must fix them")

	h.updateCR("hpp", func(cr *hppv1.HostPathProvisioner) {
		cr.Spec.FeatureGates = nil
		cr.Spec.StoragePools = cr.Spec.StoragePools[:1]
	})
	eventually(t, "SpecWarning gone once the values are fixed", func() error {
		if c, err := h.cond("hpp", hppv1.ConditionSpecWarning); err == nil {
			return fmt.Errorf("still %+v", c)
		}
		return nil
	})
}
