package hostpathprovisioner_test

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/adopt"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// The upstream operator's CR name in every fixture.
const upstreamCR = "hostpath-provisioner"

// TestTakeoverOfUpstreamStoragePoolsInstall: hpp-operator starts on a
// cluster holding what the upstream operator made for a storagePools CR.
// Nothing is replaced. Adopted in place: the CSI DaemonSet (its selector
// k8s-app=hostpath-provisioner kept: immutable), the ServiceAccount, the
// ClusterRole/Binding and Role/Binding (their rules become hpp's: no
// leases, no volumeattachments patch), the CSIDriver (its immutable
// volumeLifecycleModes kept, with an event) and the metrics Service. The
// PV upstream's driver provisioned and the user's StorageClass are not
// touched, and remain valid for hpp.
func TestTakeoverOfUpstreamStoragePoolsInstall(t *testing.T) {
	h, up := takeOverUpstream(t, "hpp-up-pools", "storagepools", nil)

	drv := &storagev1.CSIDriver{}
	if err := h.get(client.ObjectKey{Name: contract.DriverName}, drv); err != nil {
		t.Fatal(err)
	}
	if got := drv.Spec.VolumeLifecycleModes; !reflect.DeepEqual(got, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("CSIDriver volumeLifecycleModes %v: upstream's (immutable) must be kept, not fought over", got)
	}
	h.waitEvent("ImmutableFieldsKept", "CSIDriver "+contract.DriverName+" keeps spec.volumeLifecycleModes")
	checkPVsUntouched(t, h, up)
	assertSteadyStateWritesNothing(t, h, upstreamCR)
}

// TestTakeoverOfUpstreamSCC: on OpenShift, the SecurityContextConstraints
// upstream made for the CSI driver (every volume type, no owner) is
// adopted in place under the same name: hpp's volume types and seccomp
// profile, the CR as its owner (so it goes with the CR), no field left to
// upstream's manager.
func TestTakeoverOfUpstreamSCC(t *testing.T) {
	needEnv(t)
	serveOpenShift(t)
	const ns = "hpp-up-openshift"
	var up *upstreamInstall
	h := startWith(t, ns, options{
		config: func(c *render.Config) { c.OpenShift = true },
		setup:  func(admin client.Client) { up = loadUpstream(t, admin, "openshift", ns) },
	})
	takeOver(t, h, up)
	checkTakenOver(t, h, up, map[string]bool{})
	assertSteadyStateWritesNothing(t, h, upstreamCR)
}

// TestTakeoverOfUpstreamPathConfigInstall: the legacy DaemonSet has the
// same selector as hpp's and is adopted in place (same uid: no pod
// restart forced by a delete), losing upstream's INSTALLER_* env vars and
// version labels; the CSI DaemonSet beside it too, its selector kept; the
// legacy PV and its StorageClass are untouched.
func TestTakeoverOfUpstreamPathConfigInstall(t *testing.T) {
	h, up := takeOverUpstream(t, "hpp-up-legacy", "pathconfig", nil)
	checkPVsUntouched(t, h, up)
	assertSteadyStateWritesNothing(t, h, upstreamCR)
}

// TestTakeoverOfUpstreamPVCTemplateInstall: the pool's PVC (its data) is
// reused, same uid and unchanged; the mounter Deployment of the same name
// is adopted in place (its selector hpp-pool=<pool> is upstream's and
// hpp's), so the pool is never unmounted and no cleanup Job runs.
func TestTakeoverOfUpstreamPVCTemplateInstall(t *testing.T) {
	mounter := render.MounterName("fast", "node1")
	// The node must exist before the operator starts: without it the
	// upstream mounter would look like one the CR no longer wants.
	addNode1 := func(admin client.Client) {
		createNode(t, admin, "node1", map[string]string{corev1.LabelHostname: "node1"})
	}
	h, up := takeOverUpstream(t, "hpp-up-template", "pvctemplate", addNode1)
	jobs := &batchv1.JobList{}
	if err := h.admin.List(h.ctx, jobs, client.InNamespace(h.cfg.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("cleanup Job %s for an adopted mounter %s: the pool would be unmounted", jobs.Items[0].Name, mounter)
	}

	claim := up.find(t, "PersistentVolumeClaim", render.PoolClaimName("fast", "node1"))
	live := &corev1.PersistentVolumeClaim{}
	if err := h.get(client.ObjectKeyFromObject(claim), live); err != nil {
		t.Fatal(err)
	}
	if live.UID != claim.GetUID() || live.ResourceVersion != claim.GetResourceVersion() {
		t.Errorf("pool claim recreated or changed: uid %s→%s, resourceVersion %s→%s", claim.GetUID(), live.UID, claim.GetResourceVersion(), live.ResourceVersion)
	}
	d, err := h.mounter("fast", "node1")
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Spec.Template.Spec.Volumes; len(v) == 0 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != live.Name {
		t.Errorf("hpp's mounter does not mount the upstream claim %s: %+v", live.Name, v)
	}
	assertSteadyStateWritesNothing(t, h, upstreamCR)

	// Deletion waits for the pool's cleanup Job: play the Job controller.
	if err := h.admin.Delete(h.ctx, mustGetCR(t, h, upstreamCR)); err != nil {
		t.Fatal(err)
	}
	h.finishJob(render.CleanupJobName("fast", "node1"), true)
}

// takeOverUpstream starts the operator on the fixture scenario (after
// before, if any), lets it take over and checks every object; replaced
// lists the objects ("Kind/name") that must have been replaced rather than
// adopted.
func takeOverUpstream(t *testing.T, ns, scenario string, before func(client.Client), replaced ...string) (*harness, *upstreamInstall) {
	t.Helper()
	var up *upstreamInstall
	h := startWith(t, ns, options{setup: func(admin client.Client) {
		if before != nil {
			before(admin)
		}
		up = loadUpstream(t, admin, scenario, ns)
	}})
	takeOver(t, h, up)
	want := map[string]bool{}
	for _, id := range replaced {
		want[id] = true
	}
	checkTakenOver(t, h, up, want)
	return h, up
}

// takeOver waits until hpp-operator replaced upstream's workloads, plays
// the controllers envtest lacks (DaemonSets and mounters ready), and waits
// for Available.
func takeOver(t *testing.T, h *harness, up *upstreamInstall) {
	t.Helper()
	cr := mustGetCR(t, h, upstreamCR)
	names := []string{render.CSIDaemonSetName}
	if cr.Spec.IsLegacy() {
		names = append(names, render.LegacyDaemonSetName)
	}
	for _, name := range names {
		eventually(t, "DaemonSet "+name+" is hpp's", func() error {
			ds := &appsv1.DaemonSet{}
			if err := h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: name}, ds); err != nil {
				return err
			}
			if img := ds.Spec.Template.Spec.Containers[0].Image; img != h.cfg.Images.CSI && img != h.cfg.Images.Legacy {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
		setDaemonSetReady(t, h, h.cfg.Namespace, name, 1)
	}
	for _, p := range cr.Spec.StoragePools {
		if !render.IsTemplatePool(&p) {
			continue
		}
		eventually(t, "mounter of "+p.Name+" is hpp's", func() error {
			d, err := h.mounter(p.Name, "node1")
			if err != nil {
				return err
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != h.cfg.Images.Mounter {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
		h.playMounterReady(p.Name, "node1")
	}
	// Upstream's stale Available condition satisfies waitAvailable before
	// hpp's pass has applied everything: wait for the status hpp derives
	// at the end of a whole pass (its own version) first.
	eventually(t, "status written by hpp's pass", func() error {
		st := mustGetCR(t, h, upstreamCR).Status
		if st.ObservedVersion != h.cfg.Version {
			return fmt.Errorf("observed version %s, want hpp's %s", st.ObservedVersion, h.cfg.Version)
		}
		return nil
	})
	waitAvailable(t, h, upstreamCR)
}

// checkTakenOver checks every object hpp renders for the CR against what
// upstream left: same name; replaced (new uid) exactly when listed, else
// adopted (same uid); nothing of upstream's left in it (labels, containers,
// env vars, volumes, rules are hpp's, no field owned by upstream's
// manager); no second object of a kind where hpp has one; and the CR:
// spec unchanged, hpp's finalizer only, status rewritten by hpp.
func checkTakenOver(t *testing.T, h *harness, up *upstreamInstall, replaced map[string]bool) {
	t.Helper()
	cr := mustGetCR(t, h, upstreamCR)
	cfg := h.cfg.ForCR(&cr.Spec)
	want, err := cfg.CSIObjects(&cr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	want = append(cfg.SCCs(&cr.Spec), want...)
	if cr.Spec.IsLegacy() {
		want = append(cfg.LegacyObjects(&cr.Spec), want...)
	}
	want = append(want, cfg.MonitoringObjects()...)
	for _, p := range cr.Spec.StoragePools {
		if render.IsTemplatePool(&p) {
			want = append(want, cfg.MounterDeployment(&cr.Spec, &p, "node1"))
		}
	}
	for _, d := range want {
		checkObjectTakenOver(t, h, up, d, replaced)
	}
	checkNoDuplicates(t, h, want)
	checkCRTakenOver(t, h, up)
}

func checkObjectTakenOver(t *testing.T, h *harness, up *upstreamInstall, d client.Object, replaced map[string]bool) {
	t.Helper()
	kind := d.GetObjectKind().GroupVersionKind().Kind
	id := kind + "/" + d.GetName()
	fresh, err := h.scheme.New(d.GetObjectKind().GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	live := fresh.(client.Object)
	if err := h.get(client.ObjectKeyFromObject(d), live); err != nil {
		t.Errorf("%s: %v", id, err)
		return
	}
	for _, o := range up.objects {
		if o.GetKind() != kind || o.GetName() != d.GetName() {
			continue
		}
		if adopted := live.GetUID() == o.GetUID(); adopted == replaced[id] {
			t.Errorf("%s: replaced=%v, want %v (uid %s, upstream's %s)", id, !adopted, replaced[id], live.GetUID(), o.GetUID())
		}
	}
	if !reflect.DeepEqual(live.GetLabels(), d.GetLabels()) {
		t.Errorf("%s labels %v, want hpp's %v", id, live.GetLabels(), d.GetLabels())
	}
	for _, m := range live.GetManagedFields() {
		if m.Manager == adopt.UpstreamFieldManager {
			t.Errorf("%s: fields still owned by %s (%s): a later apply would not remove them", id, m.Manager, m.Operation)
		}
	}
	switch l := live.(type) {
	case *appsv1.DaemonSet:
		samePodShape(t, id, withSelector(d.(*appsv1.DaemonSet).Spec.Template, l.Spec.Selector), l.Spec.Template)
	case *appsv1.Deployment:
		samePodShape(t, id, withSelector(d.(*appsv1.Deployment).Spec.Template, l.Spec.Selector), l.Spec.Template)
	case *rbacv1.ClusterRole:
		if w := d.(*rbacv1.ClusterRole).Rules; !reflect.DeepEqual(l.Rules, w) {
			t.Errorf("%s rules %v, want hpp's %v", id, l.Rules, w)
		}
	case *rbacv1.Role:
		if w := d.(*rbacv1.Role).Rules; !reflect.DeepEqual(l.Rules, w) {
			t.Errorf("%s rules %v, want hpp's %v", id, l.Rules, w)
		}
	case *storagev1.CSIDriver:
		w := d.(*storagev1.CSIDriver).Spec
		if *l.Spec.AttachRequired || !*l.Spec.PodInfoOnMount || !*l.Spec.StorageCapacity || *l.Spec.FSGroupPolicy != *w.FSGroupPolicy {
			t.Errorf("%s spec %+v, want hpp's %+v (volumeLifecycleModes aside)", id, l.Spec, w)
		}
	case *secv1.SecurityContextConstraints:
		w := d.(*secv1.SecurityContextConstraints)
		if !slices.Equal(l.Volumes, w.Volumes) || !slices.Equal(l.Users, w.Users) || !slices.Equal(l.SeccompProfiles, w.SeccompProfiles) ||
			l.AllowPrivilegedContainer != w.AllowPrivilegedContainer || !metav1.IsControlledBy(l, mustGetCR(t, h, upstreamCR)) {
			t.Errorf("%s volumes %v users %v seccomp %v privileged %v owners %v, want hpp's %v %v %v %v and the CR as owner",
				id, l.Volumes, l.Users, l.SeccompProfiles, l.AllowPrivilegedContainer, l.OwnerReferences, w.Volumes, w.Users, w.SeccompProfiles, w.AllowPrivilegedContainer)
		}
	case *corev1.Service:
		w := d.(*corev1.Service).Spec
		if !reflect.DeepEqual(l.Spec.Selector, w.Selector) || len(l.Spec.Ports) != len(w.Ports) || l.Spec.Ports[0].Name != w.Ports[0].Name {
			t.Errorf("%s selector %v ports %v, want hpp's %v %v", id, l.Spec.Selector, l.Spec.Ports, w.Selector, w.Ports)
		}
	}
}

// withSelector is the pod template hpp renders, with the labels of the
// live selector it keeps (applier: a selector is immutable).
func withSelector(t corev1.PodTemplateSpec, sel *metav1.LabelSelector) corev1.PodTemplateSpec {
	t = *t.DeepCopy()
	for k, v := range sel.MatchLabels {
		t.Labels[k] = v
	}
	return t
}

// samePodShape: the pods run exactly hpp's containers, env vars, volumes
// and labels (upstream's sidecars and INSTALLER_* variables gone).
func samePodShape(t *testing.T, id string, want, got corev1.PodTemplateSpec) {
	t.Helper()
	if !reflect.DeepEqual(got.Labels, want.Labels) {
		t.Errorf("%s pod labels %v, want %v", id, got.Labels, want.Labels)
	}
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
			for _, e := range c.Env {
				out = append(out, c.Name+" env "+e.Name)
			}
			for _, m := range c.VolumeMounts {
				out = append(out, c.Name+" mount "+m.Name)
			}
		}
		return out
	}
	if g, w := names(got.Spec.Containers), names(want.Spec.Containers); !slices.Equal(g, w) {
		t.Errorf("%s containers\n got %v\nwant %v", id, g, w)
	}
	var gv, wv []string
	for _, v := range got.Spec.Volumes {
		gv = append(gv, v.Name)
	}
	for _, v := range want.Spec.Volumes {
		wv = append(wv, v.Name)
	}
	if !slices.Equal(gv, wv) {
		t.Errorf("%s volumes %v, want %v", id, gv, wv)
	}
}

// checkNoDuplicates: the namespace holds hpp's DaemonSets, Deployments and
// ServiceAccounts and nothing else of those kinds.
func checkNoDuplicates(t *testing.T, h *harness, want []client.Object) {
	t.Helper()
	wanted := map[string][]string{}
	for _, d := range want {
		if d.GetNamespace() != "" {
			k := d.GetObjectKind().GroupVersionKind().Kind
			wanted[k] = append(wanted[k], d.GetName())
		}
	}
	lists := map[string]client.ObjectList{"DaemonSet": &appsv1.DaemonSetList{}, "Deployment": &appsv1.DeploymentList{}, "ServiceAccount": &corev1.ServiceAccountList{}}
	for kind, list := range lists {
		if err := h.admin.List(h.ctx, list, client.InNamespace(h.cfg.Namespace)); err != nil {
			t.Fatal(err)
		}
		var got []string
		items, _ := unstructuredItems(h, list)
		for _, o := range items {
			if o.GetDeletionTimestamp() == nil && (kind != "ServiceAccount" || o.GetName() != "default") {
				got = append(got, o.GetName())
			}
		}
		w := wanted[kind]
		sort.Strings(got)
		sort.Strings(w)
		if !slices.Equal(got, w) {
			t.Errorf("%ss in the namespace %v, want hpp's %v", kind, got, w)
		}
	}
}

func unstructuredItems(h *harness, list client.ObjectList) ([]unstructured.Unstructured, error) {
	u := &unstructured.UnstructuredList{}
	if err := h.scheme.Convert(list, u, nil); err != nil {
		return nil, err
	}
	return u.Items, nil
}

// checkCRTakenOver: the spec round-trips unchanged, the finalizer is hpp's
// alone (upstream's would block deletion forever), and the status is hpp's,
// with every field upstream's status had (lastHeartbeatTime aside: hpp
// never writes one, DESIGN and status.go say why).
func checkCRTakenOver(t *testing.T, h *harness, up *upstreamInstall) {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(up.cr.GroupVersionKind())
	if err := h.get(client.ObjectKey{Name: upstreamCR}, live); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.Object["spec"], up.cr.Object["spec"]) {
		t.Errorf("CR spec changed:\n got %v\nwant %v", live.Object["spec"], up.cr.Object["spec"])
	}
	if f := live.GetFinalizers(); !slices.Equal(f, []string{hostpathprovisioner.Finalizer}) {
		t.Errorf("CR finalizers %v, want only %s", f, hostpathprovisioner.Finalizer)
	}
	status, _ := live.Object["status"].(map[string]any)
	upStatus, _ := up.cr.Object["status"].(map[string]any)
	for k := range upStatus {
		if _, ok := status[k]; !ok {
			t.Errorf("status lost upstream's field %s: %v", k, status)
		}
	}
	cr := mustGetCR(t, h, upstreamCR)
	st := cr.Status
	if st.OperatorVersion != h.cfg.Version || st.TargetVersion != h.cfg.Version || st.ObservedVersion != h.cfg.Version {
		t.Errorf("versions operator %s target %s observed %s, want hpp's %s", st.OperatorVersion, st.TargetVersion, st.ObservedVersion, h.cfg.Version)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, string(c.Type))
		if c.LastTransitionTime == nil || c.LastHeartbeatTime != nil || c.Reason == "" {
			t.Errorf("condition %+v: want hpp's (a reason, a transition time, no heartbeat)", c)
		}
		if c.Reason == "Complete" {
			t.Errorf("condition %s still upstream's: %+v", c.Type, c)
		}
	}
	sort.Strings(types)
	if !slices.Equal(types, []string{"Available", "Degraded", "Progressing"}) {
		t.Errorf("conditions %v", types)
	}
	var pools []string
	for _, p := range st.StoragePoolStatuses {
		pools = append(pools, p.Name)
	}
	var wantPools []string
	for _, p := range cr.Spec.StoragePools {
		wantPools = append(wantPools, p.Name)
	}
	if cr.Spec.IsLegacy() {
		wantPools = []string{"legacy"}
	}
	if !slices.Equal(pools, wantPools) {
		t.Errorf("storagePoolStatuses %v, want %v", pools, wantPools)
	}
}

// checkPVsUntouched: every PV and StorageClass of the fixture is exactly as
// loaded (resourceVersion unchanged), and each CSI PV still fits hpp: its
// driver is the CSIDriver hpp keeps, its topology key hpp's, its pool one
// of the CR's; each StorageClass names hpp's CSI driver or legacy
// provisioner.
func checkPVsUntouched(t *testing.T, h *harness, up *upstreamInstall) {
	t.Helper()
	cr := mustGetCR(t, h, upstreamCR)
	pools := map[string]bool{}
	for _, p := range cr.Spec.StoragePools {
		pools[p.Name] = true
	}
	if cr.Spec.IsLegacy() {
		pools["legacy"] = true
	}
	checked := 0
	for _, o := range up.objects {
		switch o.GetKind() {
		case "PersistentVolume":
			pv := &corev1.PersistentVolume{}
			if err := h.get(client.ObjectKeyFromObject(o), pv); err != nil {
				t.Fatal(err)
			}
			if pv.ResourceVersion != o.GetResourceVersion() {
				t.Errorf("PV %s was written to (resourceVersion %s → %s)", pv.Name, o.GetResourceVersion(), pv.ResourceVersion)
			}
			if c := pv.Spec.CSI; c != nil {
				term := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
				if c.Driver != contract.DriverName || c.VolumeHandle != pv.Name || term.Key != contract.TopologyKey || !pools[c.VolumeAttributes[contract.ParamStoragePool]] {
					t.Errorf("CSI PV %s no longer fits hpp: driver %s handle %s topology %s pool %s (pools %v)",
						pv.Name, c.Driver, c.VolumeHandle, term.Key, c.VolumeAttributes[contract.ParamStoragePool], pools)
				}
				if err := h.get(client.ObjectKey{Name: c.Driver}, &storagev1.CSIDriver{}); err != nil {
					t.Errorf("CSI PV %s: its CSIDriver: %v", pv.Name, err)
				}
			}
			checked++
		case "StorageClass":
			sc := &storagev1.StorageClass{}
			if err := h.get(client.ObjectKeyFromObject(o), sc); err != nil {
				t.Fatal(err)
			}
			if sc.ResourceVersion != o.GetResourceVersion() {
				t.Errorf("StorageClass %s was written to", sc.Name)
			}
			if sc.Provisioner != contract.DriverName && sc.Provisioner != contract.LegacyProvisionerName {
				t.Errorf("StorageClass %s provisioner %s is neither hpp's driver nor its legacy provisioner", sc.Name, sc.Provisioner)
			}
			if p, ok := sc.Parameters[contract.ParamStoragePool]; ok && !pools[p] {
				t.Errorf("StorageClass %s names pool %s, not in the CR", sc.Name, p)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("the fixture has no PV or StorageClass to check")
	}
}
