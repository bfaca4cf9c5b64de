package hostpathprovisioner_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/adopt"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestUpgradeFromAnOlderHPP: the operator starts on what an older hpp
// operator applied (older images, an hpp-csi flag and env var this version
// no longer sets, an older observedVersion). The DaemonSet and the mounter
// are updated in place (same uid: the DaemonSet rolls, the pool is never
// unmounted by a delete), the removed flag and env var are gone, the
// pool's claim is untouched, status reports the new version once rolled
// out, and the steady state after convergence sends no request.
func TestUpgradeFromAnOlderHPP(t *testing.T) {
	const ns = "hpp-upgrade"
	const node = "upg-1"
	const oldVersion = "v9.8.0-old"
	pool := hppv1.StoragePool{Name: "tpl", Path: "/var/tpl", PVCTemplate: template(corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)}
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"}, pool)
	old := map[string]types.UID{}
	h := startWith(t, ns, options{
		config: func(c *render.Config) { c.Images.Mounter = "localhost/hpp-mounter:test" },
		setup: func(admin client.Client) {
			createNode(t, admin, node, nil)
			old = applyOlderHPP(t, admin, ns, cr, &pool, node, oldVersion)
		},
	})

	eventually(t, "DaemonSet upgraded in place", func() error {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
			return err
		}
		c := ds.Spec.Template.Spec.Containers[0]
		if c.Image != h.cfg.Images.CSI {
			return fmt.Errorf("image %s", c.Image)
		}
		if slices.Contains(c.Args, "--removed-flag=1") || slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "REMOVED_ENV" }) {
			return fmt.Errorf("the older version's flag or env var is still there: args %v env %v", c.Args, c.Env)
		}
		if v, _ := argValue(c.Args, "--version"); v != h.cfg.Version {
			return fmt.Errorf("--version=%s", v)
		}
		return nil
	})
	eventually(t, "mounter upgraded in place", func() error {
		d, err := h.mounter(pool.Name, node)
		if err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != h.cfg.Images.Mounter {
			return fmt.Errorf("mounter image %s", img)
		}
		return nil
	})
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, 1)
	h.playMounterReady(pool.Name, node)
	waitAvailable(t, h, "hpp")

	for id, uid := range old {
		kind, name, _ := strings.Cut(id, "/")
		var obj client.Object
		switch kind {
		case "DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "Deployment":
			obj = &appsv1.Deployment{}
		case "PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if obj.GetUID() != uid {
			t.Errorf("%s was deleted and recreated by the upgrade (uid %s → %s)", id, uid, obj.GetUID())
		}
	}
	if f := mustGetCR(t, h, "hpp").Finalizers; !slices.Equal(f, []string{hostpathprovisioner.Finalizer}) {
		t.Errorf("finalizers %v, want only %s (upstream's name) in place of %s", f, hostpathprovisioner.Finalizer, olderHPPFinalizer)
	}
	if d, err := h.mounter(pool.Name, node); err != nil {
		t.Error(err)
	} else if d.Spec.Selector.MatchLabels[render.MounterSelector] != d.Name {
		t.Errorf("the older mounter's selector %v must be kept (immutable)", d.Spec.Selector)
	}
	got := mustGetCR(t, h, "hpp").Status
	if got.ObservedVersion != h.cfg.Version || got.OperatorVersion != h.cfg.Version {
		t.Errorf("status versions observed %s operator %s, want %s", got.ObservedVersion, got.OperatorVersion, h.cfg.Version)
	}
	if c := got.FindCondition(hppv1.ConditionDegraded); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Degraded after an upgrade: %+v", c)
	}
	assertSteadyStateWritesNothing(t, h, "hpp")

	if err := h.admin.Delete(h.ctx, mustGetCR(t, h, "hpp")); err != nil {
		t.Fatal(err)
	}
	h.finishJob(render.CleanupJobName(pool.Name, node), true)
}

// olderHPPFinalizer is the finalizer hpp set before it took upstream's.
const olderHPPFinalizer = "hostpathprovisioner.kubevirt.io/cleanup"

// applyOlderHPP writes what an older hpp operator left: the CR with its
// finalizer and status, and the objects it rendered with older images and
// version plus a flag and env var since removed, applied server-side by
// its field manager. It returns the uids of the objects that must survive.
func applyOlderHPP(t *testing.T, admin client.Client, ns string, cr *hppv1.HostPathProvisioner, pool *hppv1.StoragePool, node, version string) map[string]types.UID {
	t.Helper()
	ctx := t.Context()
	controllerutil.AddFinalizer(cr, olderHPPFinalizer)
	if err := admin.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	// The operator may already be moving the finalizer: retry on conflict.
	eventually(t, "older status written", func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return err
		}
		cr.Status.ObservedVersion, cr.Status.OperatorVersion, cr.Status.TargetVersion = version, version, version
		return admin.Status().Update(ctx, cr)
	})
	cfg := render.DefaultConfig()
	cfg.Namespace, cfg.Version = ns, version
	cfg.Images.CSI, cfg.Images.Legacy, cfg.Images.Mounter = "localhost/hpp-csi:old", "localhost/hpp-legacy:old", "localhost/hpp-mounter:old"
	objs, err := cfg.CSIObjects(&cr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	for _, o := range objs {
		if d, ok := o.(*appsv1.DaemonSet); ok {
			ds = d
		}
	}
	if ds == nil {
		t.Fatal("CSIObjects rendered no DaemonSet")
	}
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--removed-flag=1")
	c.Env = append(c.Env, corev1.EnvVar{Name: "REMOVED_ENV", Value: "1"})
	claim := cfg.PoolClaim(pool, node)
	// The older hpp's mounter selected its pods by its own name.
	mounter := cfg.MounterDeployment(&cr.Spec, pool, node)
	mounter.Spec.Selector.MatchLabels = map[string]string{render.MounterSelector: mounter.Name}
	delete(mounter.Spec.Template.Labels, render.PoolSelectorLabel)
	objs = append(objs, claim, mounter)
	uids := map[string]types.UID{}
	for _, o := range objs {
		if _, isClaim := o.(*corev1.PersistentVolumeClaim); !isClaim && o.GetNamespace() != "" {
			if err := controllerutil.SetControllerReference(cr, o, admin.Scheme()); err != nil {
				t.Fatal(err)
			}
		}
		m, err := render.Clean(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["hostpathprovisioner.kubevirt.io/applied-hash"] = "from-" + version
		u.SetAnnotations(ann)
		if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(adopt.FieldOwner), client.ForceOwnership); err != nil {
			t.Fatalf("apply the older %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		switch u.GetKind() {
		case "DaemonSet", "Deployment", "PersistentVolumeClaim":
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			if err := admin.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
				t.Fatal(err)
			}
			uids[u.GetKind()+"/"+u.GetName()] = live.GetUID()
		}
	}
	return uids
}
