package hostpathprovisioner_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func TestLegacyCRAndSwitchToPools(t *testing.T) {
	h := start(t, "hpp-legacy-switch")
	ns := h.cfg.Namespace
	cr := &hppv1.HostPathProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: "hpp"},
		Spec: hppv1.HostPathProvisionerSpec{
			PathConfig: &hppv1.PathConfig{Path: "/var/hpvolumes", UseNamingPrefix: true},
			Workload:   hppv1.NodePlacement{NodeSelector: map[string]string{"kubernetes.io/os": "linux"}},
		},
	}
	h.create(cr)
	legacy := &appsv1.DaemonSet{}
	eventually(t, "legacy DaemonSet created", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.LegacyDaemonSetName}, legacy)
	})
	c := legacy.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["PV_DIR"] != "/var/hpvolumes" || env["USE_NAMING_PREFIX"] != "true" || c.Image != "localhost/hpp-legacy:test" {
		t.Errorf("legacy container env %v image %s", env, c.Image)
	}
	if c.VolumeMounts[0].MountPath != "/var/hpvolumes" || legacy.Spec.Template.Spec.Volumes[0].HostPath.Path != "/var/hpvolumes" {
		t.Errorf("legacy directory must be mounted at its host path: %+v", c.VolumeMounts)
	}
	if legacy.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("legacy nodeSelector %v", legacy.Spec.Template.Spec.NodeSelector)
	}
	// The CSI driver runs beside it, as upstream's operator does: pool
	// "legacy" in <path>/csi, and the legacy directory itself for the PVs
	// hpp-migrate moves (legacyPath).
	csiDS := &appsv1.DaemonSet{}
	eventually(t, "CSI DaemonSet for a pathConfig CR", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, csiDS)
	})
	var datadir string
	for _, e := range csiDS.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "PV_DIR" {
			datadir = e.Value
		}
	}
	if datadir != `[{"name":"legacy","path":"/var/hpvolumes/csi","legacyPath":"/var/hpvolumes"}]` {
		t.Errorf("hpp-csi PV_DIR (--datadir) for a pathConfig CR: %s", datadir)
	}
	setDaemonSetReady(t, h, ns, render.LegacyDaemonSetName, 1)
	if c, err := h.cond("hpp", hppv1.ConditionAvailable); err == nil && c.Status == corev1.ConditionTrue {
		t.Error("Available with the CSI DaemonSet not ready yet")
	}
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, 1)
	waitAvailable(t, h, "hpp")
	assertSteadyStateWritesNothing(t, h, "hpp")

	// Switch to pools: the CSI DaemonSet appears, the legacy one goes.
	eventually(t, "switch to pools", func() error {
		cur := &hppv1.HostPathProvisioner{}
		if err := h.get(client.ObjectKey{Name: "hpp"}, cur); err != nil {
			return err
		}
		cur.Spec.PathConfig = nil
		cur.Spec.StoragePools = []hppv1.StoragePool{{Name: "legacy", Path: "/var/hpvolumes"}}
		return h.admin.Update(h.ctx, cur)
	})
	eventually(t, "CSI DaemonSet created, legacy one deleted", func() error {
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, &appsv1.DaemonSet{}); err != nil {
			return err
		}
		err := h.get(client.ObjectKey{Namespace: ns, Name: render.LegacyDaemonSetName}, &appsv1.DaemonSet{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("legacy DaemonSet still there: %w", err)
		}
		return nil
	})

	// A placement change rolls into the DaemonSet; removing a selector key
	// removes it there too (server-side apply owns the field).
	eventually(t, "change placement", func() error {
		cur := &hppv1.HostPathProvisioner{}
		if err := h.get(client.ObjectKey{Name: "hpp"}, cur); err != nil {
			return err
		}
		cur.Spec.Workload.NodeSelector = map[string]string{"storage": "fast"}
		return h.admin.Update(h.ctx, cur)
	})
	eventually(t, "DaemonSet follows the new placement", func() error {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
			return err
		}
		sel := ds.Spec.Template.Spec.NodeSelector
		if len(sel) != 1 || sel["storage"] != "fast" {
			return fmt.Errorf("nodeSelector %v", sel)
		}
		return nil
	})
}

func TestDeletionRemovesObjectsAndKeepsCSIDriverWhilePVsExist(t *testing.T) {
	h := start(t, "hpp-deletion")
	ns := h.cfg.Namespace
	h.create(poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"}))
	eventually(t, "CSI DaemonSet created", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, &appsv1.DaemonSet{})
	})
	// A user's object that happens to have one of our names is not ours.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1234"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: contract.DriverName, VolumeHandle: "pvc-1234",
				VolumeAttributes: map[string]string{contract.ParamStoragePool: "local"}}},
		},
	}
	h.create(pv)
	if err := h.admin.Delete(h.ctx, poolsCR("hpp")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CR gone after cleanup", func() error {
		err := h.get(client.ObjectKey{Name: "hpp"}, &hppv1.HostPathProvisioner{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("CR still there: %w", err)
		}
		return nil
	})
	// envtest has no garbage collector: everything below was deleted by the
	// finalizer itself.
	for _, o := range []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: render.CSIDaemonSetName}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: render.CSIServiceAccount}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: render.CSIServiceAccount}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: render.CSIServiceAccount}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: render.CSIServiceAccount}},
	} {
		eventually(t, fmt.Sprintf("%T %s deleted", o, o.GetName()), func() error {
			err := h.get(client.ObjectKeyFromObject(o), o)
			if err == nil && o.GetDeletionTimestamp().IsZero() {
				return fmt.Errorf("still there")
			}
			return client.IgnoreNotFound(err)
		})
	}
	if err := h.get(client.ObjectKey{Name: contract.DriverName}, &storagev1.CSIDriver{}); err != nil {
		t.Fatalf("CSIDriver deleted while a PV of the driver exists: %v", err)
	}
	eventually(t, "CSIDriverKept event", func() error {
		evs := &eventsv1.EventList{}
		if err := h.admin.List(h.ctx, evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "CSIDriverKept" && strings.HasPrefix(e.Note, "1 PersistentVolume(s) of "+contract.DriverName+" still exist") {
				return nil
			}
		}
		return fmt.Errorf("no CSIDriverKept event among %d events", len(evs.Items))
	})
	// The last PV goes: so does the CSIDriver. (The API server's admission
	// adds the pv-protection finalizer; envtest has no controller to remove
	// it, so the test does.)
	if err := h.admin.Delete(h.ctx, pv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PV finalizer removed", func() error {
		cur := &corev1.PersistentVolume{}
		if err := h.get(client.ObjectKeyFromObject(pv), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		cur.Finalizers = nil
		return h.admin.Update(h.ctx, cur)
	})
	eventually(t, "CSIDriver deleted after the last PV", func() error {
		err := h.get(client.ObjectKey{Name: contract.DriverName}, &storagev1.CSIDriver{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// TestCRDRulesHoldWithoutTheWebhook: the real API server enforces the
// CRD's schema and CEL rules by itself: upstream's rules (unique names and
// paths, name length, absolute paths), not hpp's stricter ones, which the
// webhook ratchets (a name that is no DNS label, an unclean or nested path
// are not refused here).
func TestCRDRulesHoldWithoutTheWebhook(t *testing.T) {
	needEnv(t)
	h := start(t, "hpp-crd-rules")
	cases := map[string]struct {
		spec    hppv1.HostPathProvisionerSpec
		want    []string
		notWant []string
	}{
		"both forms": {
			spec: hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/a"},
				StoragePools: []hppv1.StoragePool{{Name: "a", Path: "/b"}}},
			want: []string{"spec: Invalid value: exactly one of spec.pathConfig and spec.storagePools must be set"},
		},
		"neither": {
			want: []string{"exactly one of spec.pathConfig and spec.storagePools must be set"},
		},
		"bad pools": {
			spec: hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{
				{Name: "Bad_Name", Path: "relative"},
				{Name: "a", Path: "/data"}, {Name: "b", Path: "/data/in"},
				{Name: "c", Path: "/x/../y/"}, {Name: "c", Path: "/z"}, {Name: "d", Path: "/z"},
			}},
			want: []string{
				`spec.storagePools[0].path: Invalid value: "relative": must be an absolute path`,
				`spec.storagePools: Invalid value: pool names must be unique`,
				`spec.storagePools: Invalid value: pool paths must be unique`,
			},
			notWant: []string{"Bad_Name", "/x/../y/", "/data/in"},
		},
		"long name": {
			spec: hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: strings.Repeat("a", 51), Path: "/a"}}},
			want: []string{"spec.storagePools[0].name: Too long: may not be more than 50 bytes"},
		},
	}
	for name, tc := range cases {
		cr := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: tc.spec}
		err := h.admin.Create(h.ctx, cr)
		if err == nil {
			t.Errorf("%s: created an invalid CR", name)
			_ = h.admin.Delete(h.ctx, cr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error lacks %q:\n%v", name, w, err)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(err.Error(), w) {
				t.Errorf("%s: the CRD refuses %q, which upstream's accepts:\n%v", name, w, err)
			}
		}
	}
}
