package hostpathprovisioner_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/nodeloss"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// nodeLoss is the node-loss controller beside the operator's reconciler,
// with a clock the test moves.
type nodeLoss struct {
	*harness
	offset atomic.Int64 // nanoseconds added to the real clock
}

func startNodeLoss(t *testing.T, ns string) *nodeLoss {
	h := start(t, ns)
	nl := &nodeLoss{harness: h}
	r := &nodeloss.Reconciler{
		Client: h.mgr.GetClient(), Recorder: h.mgr.GetEventRecorder("hpp-operator"), Log: testr.New(t),
		ReleaseDelay: 10 * time.Minute, NotReadyGrace: 5 * time.Minute,
		Now: func() time.Time { return time.Now().Add(time.Duration(nl.offset.Load())) },
	}
	if err := r.SetupWithManager(h.mgr); err != nil {
		t.Fatal(err)
	}
	return nl
}

// advance moves the clock and wakes the controller (a PV change).
func (nl *nodeLoss) advance(d time.Duration, pv string) {
	nl.offset.Add(int64(d))
	obj := &corev1.PersistentVolume{}
	if err := nl.get(client.ObjectKey{Name: pv}, obj); err != nil {
		nl.t.Fatal(err)
	}
	patch := client.MergeFrom(obj.DeepCopy())
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels["tick"] = fmt.Sprint(time.Now().UnixNano())
	if err := nl.admin.Patch(nl.ctx, obj, patch); err != nil {
		nl.t.Fatal(err)
	}
}

func (nl *nodeLoss) node(name string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if err := nl.admin.Create(nl.ctx, n); err != nil {
		nl.t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := nl.admin.Status().Update(nl.ctx, n); err != nil {
		nl.t.Fatal(err)
	}
}

func (nl *nodeLoss) deleteNode(name string) {
	if err := nl.admin.Delete(nl.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		nl.t.Fatal(err)
	}
}

// volume makes a bound claim and its PV on node, CSI or legacy.
func (nl *nodeLoss) volume(ns, name, node string, legacy bool, claimAnn map[string]string) {
	pvName := "pvc-" + name
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Finalizers: []string{"external-provisioner.volume.kubernetes.io/finalizer"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	key := contract.TopologyKey
	if legacy {
		key = corev1.LabelHostname
		pv.Annotations = map[string]string{contract.AnnProvisionedBy: contract.LegacyProvisionerName, contract.AnnIdentity: node}
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/var/hpvolumes/" + pvName}
	} else {
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: contract.DriverName, VolumeHandle: pvName, VolumeAttributes: map[string]string{contract.ParamStoragePool: "local"}}
	}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: claimAnn},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:  pvName,
		},
	}
	if err := nl.admin.Create(nl.ctx, pvc); err != nil {
		nl.t.Fatal(err)
	}
	pv.Spec.ClaimRef.UID = pvc.UID
	if err := nl.admin.Create(nl.ctx, pv); err != nil {
		nl.t.Fatal(err)
	}
	nl.t.Cleanup(func() {
		cur := &corev1.PersistentVolume{}
		if nl.get(client.ObjectKey{Name: pvName}, cur) == nil {
			cur.Finalizers = nil
			_ = nl.admin.Update(nl.ctx, cur)
			_ = nl.admin.Delete(nl.ctx, cur)
		}
	})
}

func (nl *nodeLoss) pod(ns, name, node, claim string) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
	}
	if err := nl.admin.Create(nl.ctx, p); err != nil {
		nl.t.Fatal(err)
	}
}

func (nl *nodeLoss) stranded(cr string) map[string]hppv1.StrandedNode {
	obj := &hppv1.HostPathProvisioner{}
	if err := nl.get(client.ObjectKey{Name: cr}, obj); err != nil {
		nl.t.Fatal(err)
	}
	out := map[string]hppv1.StrandedNode{}
	for _, n := range obj.Status.StrandedVolumes {
		out[n.Node] = n
	}
	return out
}

func actions(n hppv1.StrandedNode) string {
	var parts []string
	for _, v := range n.Volumes {
		parts = append(parts, v.PersistentVolume+"="+v.Action)
	}
	return strings.Join(parts, " ")
}

func strandedMetric(node string) (float64, bool) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, false
	}
	for _, f := range families {
		if f.GetName() != "kubevirt_hpp_stranded_volumes" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == node {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func (nl *nodeLoss) exists(obj client.Object) bool {
	err := nl.get(client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		nl.t.Fatal(err)
	}
	return err == nil
}

// A deleted node: its volumes are reported at once (event, status,
// metric); after the delay only the opted-in claim that no running pod
// uses is released, the pod waiting for it deleted, and its orphaned PV
// removed. A node recreated before the delay cancels everything.
func TestNodeLoss(t *testing.T) {
	const ns = "node-loss"
	nl := startNodeLoss(t, ns)
	if err := nl.admin.Create(nl.ctx, poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"})); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"lost-1", "live-1", "back-1"} {
		nl.node(n)
	}
	opted := map[string]string{contract.AnnReleaseAfterNodeLoss: "1m"}
	nl.volume(ns, "released", "lost-1", false, opted)
	nl.volume(ns, "kept", "lost-1", false, nil)
	nl.volume(ns, "legacy", "lost-1", true, nil)
	nl.volume(ns, "busy", "lost-1", false, opted)
	nl.volume(ns, "optout", "lost-1", false, map[string]string{contract.AnnReleaseAfterNodeLoss: "false"})
	nl.volume(ns, "returns", "back-1", false, opted)
	nl.pod(ns, "waiting", "lost-1", "released") // bound to the lost node: runs nowhere
	nl.pod(ns, "running", "live-1", "busy")     // on a live node: the claim is in use

	nl.deleteNode("lost-1")
	nl.deleteNode("back-1")
	eventually(t, "both lost nodes in status.strandedVolumes", func() error {
		s := nl.stranded("hpp")
		lost, back := s["lost-1"], s["back-1"]
		want := "pvc-busy=Waiting pvc-kept=Kept pvc-legacy=Kept pvc-optout=Kept pvc-released=Waiting"
		if lost.Reason != hppv1.StrandedNodeDeleted || lost.Count != 5 || actions(lost) != want || back.Count != 1 {
			return fmt.Errorf("status %+v, want lost-1 with %s and back-1 with 1 volume", s, want)
		}
		return nil
	})
	if v, ok := strandedMetric("lost-1"); !ok || v != 5 {
		t.Errorf("kubevirt_hpp_stranded_volumes{node=lost-1} = %v (present %v), want 5", v, ok)
	}
	nl.waitEvent("NodeLost", "volume pvc-kept lives on node lost-1, which was removed at ")
	nl.waitEvent("NodeLost", "; its data is on that node's disk; kept (annotate the claim "+contract.AnnReleaseAfterNodeLoss+"=true to have hpp release it)")
	nl.waitEvent("NodeLost", `volume pvc-released lives on node lost-1`)

	// back-1 returns before the delay.
	nl.node("back-1")
	eventually(t, "back-1 out of the status", func() error {
		if n, ok := nl.stranded("hpp")["back-1"]; ok {
			return fmt.Errorf("still there: %+v", n)
		}
		return nil
	})
	nl.waitEvent("NodeBack", "node back-1 is back: its 1 volume(s) are no longer stranded; nothing was released")

	nl.advance(2*time.Minute, "pvc-kept")
	claim := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	pv := func(name string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	eventually(t, "the opted-in claim, its waiting pod and its PV gone", func() error {
		// envtest runs no controllers: play the protection controllers,
		// which let a deleted claim and PV go once nothing uses them (hpp
		// itself must take off csi-provisioner's finalizer).
		nl.dropProtection(claim("released"), "kubernetes.io/pvc-protection")
		nl.dropProtection(pv("pvc-released"), "kubernetes.io/pv-protection")
		if nl.exists(claim("released")) || nl.exists(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiting"}}) || nl.exists(pv("pvc-released")) {
			return fmt.Errorf("claim, pod or PV still there")
		}
		return nil
	})
	nl.waitEvent("Released", "hpp deleted claim node-loss/released: its volume pvc-released is on node lost-1")
	nl.waitEvent("VolumeLost", `hpp removed PV pvc-released (claim node-loss/released, pool "local", 1Gi): its node lost-1 was removed at `)
	for _, name := range []string{"kept", "legacy", "busy", "optout", "returns"} {
		if !nl.exists(claim(name)) || !nl.exists(pv("pvc-"+name)) {
			t.Errorf("claim %s or its PV was deleted", name)
		}
	}
	if !nl.exists(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}}) {
		t.Error("the running pod was deleted")
	}
	eventually(t, "status after the release", func() error {
		want := "pvc-busy=InUse pvc-kept=Kept pvc-legacy=Kept pvc-optout=Kept"
		if got := actions(nl.stranded("hpp")["lost-1"]); got != want {
			return fmt.Errorf("lost-1: %s, want %s", got, want)
		}
		return nil
	})
}

// dropProtection removes a protection finalizer from an object being
// deleted, as kube-controller-manager would.
func (nl *nodeLoss) dropProtection(obj client.Object, finalizer string) {
	if !nl.exists(obj) || obj.GetDeletionTimestamp() == nil {
		return
	}
	var keep []string
	for _, f := range obj.GetFinalizers() {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	if len(keep) == len(obj.GetFinalizers()) {
		return
	}
	obj.SetFinalizers(keep)
	_ = nl.admin.Update(nl.ctx, obj)
}
