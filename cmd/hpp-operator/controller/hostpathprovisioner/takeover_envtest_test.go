package hostpathprovisioner_test

import (
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// TestTakeoverOfUpstreamObjects: objects the upstream operator left (same
// names, its labels, a DaemonSet selector hpp would not choose) are adopted
// in place: the CSI DaemonSet keeps its uid and its live selector (never
// deleted and recreated: every node's plugin would stop at once), rolls
// one node at a time, and keeps upstream's plugin directory, where kubelet
// dials the registered socket.
func TestTakeoverOfUpstreamObjects(t *testing.T) {
	const ns = "hpp-takeover"
	upstream := map[string]string{"k8s-app": "hostpath-provisioner"}
	var uid types.UID
	h := startWith(t, ns, options{setup: func(admin client.Client) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: render.CSIServiceAccount, Namespace: ns, Labels: upstream}}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: render.CSIDaemonSetName, Namespace: ns, Labels: upstream},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: upstream},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: upstream},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "hostpath-provisioner", Image: "quay.io/kubevirt/hostpath-csi-driver:v0.20.0"}},
						Volumes: []corev1.Volume{{Name: "socket-dir", VolumeSource: corev1.VolumeSource{
							HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/plugins/csi-hostpath"}}}},
					},
				},
			},
		}
		for _, o := range []client.Object{sa, ds} {
			if err := admin.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
		uid = ds.UID
	}})
	h.create(poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpvolumes"}))
	eventually(t, "upstream DaemonSet adopted in place", func() error {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
			return err
		}
		if ds.UID != uid {
			return fmt.Errorf("uid %s, upstream's %s: replaced", ds.UID, uid)
		}
		if sel := ds.Spec.Selector.MatchLabels; !reflect.DeepEqual(sel, upstream) {
			return fmt.Errorf("selector %v, want upstream's %v", sel, upstream)
		}
		if ds.Spec.Template.Labels["k8s-app"] != "hostpath-provisioner" {
			return fmt.Errorf("pod labels %v do not match the selector", ds.Spec.Template.Labels)
		}
		if ds.Spec.Template.Spec.Containers[0].Image != "localhost/hpp-csi:test" {
			return fmt.Errorf("image %s", ds.Spec.Template.Spec.Containers[0].Image)
		}
		if ru := ds.Spec.UpdateStrategy.RollingUpdate; ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType ||
			ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "1" {
			return fmt.Errorf("update strategy %+v, want RollingUpdate maxUnavailable 1", ds.Spec.UpdateStrategy)
		}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == "socket-dir" && v.HostPath.Path != "/var/lib/kubelet/plugins/csi-hostpath" {
				return fmt.Errorf("socket directory %s, want upstream's (kubelet dials it)", v.HostPath.Path)
			}
		}
		return nil
	})
	h.waitEvent("ImmutableFieldsKept", "DaemonSet "+render.CSIDaemonSetName+" keeps spec.selector")
	sa := &corev1.ServiceAccount{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIServiceAccount}, sa); err != nil {
		t.Fatal(err)
	}
	if sa.Labels[render.ManagedByLabel] != "hpp-operator" || len(sa.OwnerReferences) != 1 || sa.OwnerReferences[0].Name != "hpp" {
		t.Errorf("ServiceAccount not adopted: labels %v owners %v", sa.Labels, sa.OwnerReferences)
	}

	// A user who lets more nodes roll at once keeps that choice.
	patch := []byte(`{"spec":{"updateStrategy":{"rollingUpdate":{"maxUnavailable":3}}}}`)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: render.CSIDaemonSetName}}
	if err := h.admin.Patch(h.ctx, ds, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-patch")); err != nil {
		t.Fatal(err)
	}
	// Any change to the CR reconciles and applies again.
	pull := []byte(`{"spec":{"imagePullPolicy":"Always"}}`)
	if err := h.admin.Patch(h.ctx, mustGetCR(t, h, "hpp"), client.RawPatch(types.MergePatchType, pull)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the user's maxUnavailable kept across an apply", func() error {
		if err := h.get(client.ObjectKeyFromObject(ds), ds); err != nil {
			return err
		}
		if pp := ds.Spec.Template.Spec.Containers[0].ImagePullPolicy; pp != corev1.PullAlways {
			return fmt.Errorf("not applied yet: pull policy %s", pp)
		}
		if mu := ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable; mu.String() != "3" {
			return fmt.Errorf("maxUnavailable %s, want the user's 3", mu.String())
		}
		return nil
	})
}

// TestTakeoverKeepsLongNamedPool: a pool whose name and node name together
// pass 53 characters. Upstream named its claim and mounter with its
// shortening (hpp-pool-653b815e, asserted as upstream's literal): hpp
// finds both under that name and adopts them (same uid, the mounter
// rolled to hpp's image, no cleanup Job), so the live pool is never
// unmounted nor replaced by a new, empty claim.
func TestTakeoverKeepsLongNamedPool(t *testing.T) {
	const ns = "hpp-takeover-long"
	const pool = "a-pool-name-of-exactly-fifty-characters-0123456789"
	const node = "hpp-node"
	const upstreamName = "hpp-pool-653b815e"
	var claimUID, mounterUID types.UID
	h := startWith(t, ns, options{setup: func(admin client.Client) {
		createNode(t, admin, node, map[string]string{corev1.LabelHostname: node})
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: upstreamName, Labels: map[string]string{contract.PoolLabel: pool + "-hpp"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		sel := map[string]string{"hpp-pool": pool}
		mounter := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: upstreamName, Labels: map[string]string{"k8s-app": "hostpath-provisioner", contract.PoolLabel: pool + "-hpp"}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "mounter", Image: "quay.io/kubevirt/hostpath-provisioner-operator",
						Command: []string{"/usr/bin/mounter", "--storagePoolPath", "/source", "--mountPath", "/var/long/csi", "--hostPath", "/host"}}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: upstreamName}}}},
				}},
			},
		}
		for _, o := range []client.Object{claim, mounter} {
			if err := admin.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
		claimUID, mounterUID = claim.UID, mounter.UID
	}})
	if got := render.PoolClaimName(pool, node); got != upstreamName {
		t.Fatalf("hpp names the claim %s, upstream %s", got, upstreamName)
	}
	cr := poolsCR("hpp", hppv1.StoragePool{Name: pool, Path: "/var/long", PVCTemplate: template(corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)})
	h.create(cr)
	eventually(t, "upstream's long-named mounter adopted", func() error {
		d := &appsv1.Deployment{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: upstreamName}, d); err != nil {
			return err
		}
		if d.UID != mounterUID {
			return fmt.Errorf("mounter uid %s, upstream's %s: replaced", d.UID, mounterUID)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != h.cfg.Images.Mounter {
			return fmt.Errorf("image %s", img)
		}
		if !metav1.IsControlledBy(d, mustGetCR(t, h, "hpp")) {
			return fmt.Errorf("not owned by the CR: %v", d.OwnerReferences)
		}
		return nil
	})
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: upstreamName}, pvc); err != nil || pvc.UID != claimUID {
		t.Errorf("claim %s: uid %s (upstream's %s), %v", upstreamName, pvc.UID, claimUID, err)
	}
	for _, kind := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.PersistentVolumeClaimList{}, &batchv1.JobList{}} {
		if err := h.admin.List(h.ctx, kind, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, _ := unstructuredItems(h, kind)
		for _, o := range items {
			// csi-resizer's Deployment is cluster-wide, not a pool's.
			if o.GetName() != upstreamName && o.GetName() != render.ResizerName {
				t.Errorf("%s %s made beside upstream's %s (a twin claim or mounter, or a cleanup Job that unmounts the pool)", o.GetKind(), o.GetName(), upstreamName)
			}
		}
	}
	// Deletion waits for the pool's cleanup Job (upstream's name too):
	// play the Job controller.
	if err := h.admin.Delete(h.ctx, mustGetCR(t, h, "hpp")); err != nil {
		t.Fatal(err)
	}
	if got := render.CleanupJobName(pool, node); got != "cleanup-pool-c1c5406a" {
		t.Errorf("cleanup Job %s, want upstream's cleanup-pool-c1c5406a", got)
	}
	h.finishJob("cleanup-pool-c1c5406a", true)
}

// TestMissingPriorityClassDegradesInsteadOfBlockingPods.
func TestMissingPriorityClassDegradesInsteadOfBlockingPods(t *testing.T) {
	const ns = "hpp-priority"
	h := startWith(t, ns, options{config: func(c *render.Config) { c.PriorityClassName = "hpp-node-critical" }})
	h.create(poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpvolumes"}))
	eventually(t, "Degraded=PriorityClassMissing, DaemonSet without priority class", func() error {
		c, err := h.cond("hpp", hppv1.ConditionDegraded)
		if err != nil {
			return err
		}
		want := `PriorityClass "hpp-node-critical" (--priority-class) does not exist: node pods run without a priority class until it is created`
		if c.Status != corev1.ConditionTrue || c.Reason != "PriorityClassMissing" || c.Message != want {
			return fmt.Errorf("Degraded %+v", c)
		}
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
			return err
		}
		if pc := ds.Spec.Template.Spec.PriorityClassName; pc != "" {
			return fmt.Errorf("priority class %q", pc)
		}
		return nil
	})
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "hpp-node-critical"}, Value: 1000000}
	h.create(pc)
	t.Cleanup(func() { _ = h.admin.Delete(h.ctx, pc) })
	eventually(t, "DaemonSet uses the PriorityClass once it exists", func() error {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
			return err
		}
		if ds.Spec.Template.Spec.PriorityClassName != "hpp-node-critical" {
			return fmt.Errorf("priority class %q", ds.Spec.Template.Spec.PriorityClassName)
		}
		c, err := h.cond("hpp", hppv1.ConditionDegraded)
		if err != nil || c.Status != corev1.ConditionFalse {
			return fmt.Errorf("still degraded: %+v %w", c, err)
		}
		return nil
	})
}
