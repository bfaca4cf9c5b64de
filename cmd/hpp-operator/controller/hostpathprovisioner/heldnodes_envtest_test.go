package hostpathprovisioner_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestNodeSelectorChangeKeepsDriverWhereVolumesAre: a node that leaves
// spec.workload's placement while it holds volumes of a directory pool
// keeps the CSI driver (the DaemonSet's affinity names it) and is reported
// in the pool's status; once its volumes are gone, the DaemonSet goes back
// to the plain placement. Directory pools report each node's hpp-csi pod.
func TestNodeSelectorChangeKeepsDriverWhereVolumesAre(t *testing.T) {
	h := start(t, "hpp-held-nodes")
	sel := map[string]string{"hpp": "yes"}
	addNode(t, h, "held-1", sel)
	addNode(t, h, "stay-1", sel)
	pv := testenv.DriverPV("pvc-held", "local", "held-1")
	h.create(pv)
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/local"})
	cr.Spec.Workload.NodeSelector = sel
	h.create(cr)
	h.readyCSIPod("stay-1")
	eventually(t, "DaemonSet with the plain placement", func() error {
		ds := h.csiDaemonSet()
		if ds.Spec.Template.Spec.NodeSelector["hpp"] != "yes" || ds.Spec.Template.Spec.Affinity != nil {
			return fmt.Errorf("nodeSelector %v, affinity %+v", ds.Spec.Template.Spec.NodeSelector, ds.Spec.Template.Spec.Affinity)
		}
		return nil
	})

	h.setNodeLabels("held-1", nil)
	eventually(t, "DaemonSet kept on the node holding a volume", func() error {
		return heldPlacement(h.csiDaemonSet(), []string{"held-1"})
	})
	eventually(t, "pool status names both nodes", func() error {
		ps, err := h.poolStatus("hpp", "local")
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ps.Nodes, func(n hppv1.PoolNodeStatus) bool { return n.Name == "held-1" })
		j := slices.IndexFunc(ps.Nodes, func(n hppv1.PoolNodeStatus) bool { return n.Name == "stay-1" })
		if i < 0 || j < 0 {
			return fmt.Errorf("nodes %+v", ps.Nodes)
		}
		if !strings.Contains(ps.Nodes[i].Reason, `holds 1 volume(s) of pool "local": hpp-csi`) {
			return fmt.Errorf("held node %+v", ps.Nodes[i])
		}
		if s := ps.Nodes[j]; !s.Ready || s.Phase != hppv1.StoragePoolReady {
			return fmt.Errorf("node with a ready hpp-csi pod %+v", s)
		}
		return nil
	})

	if err := h.admin.Delete(h.ctx, pv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "placement back to the nodeSelector once the volume is gone", func() error {
		cur := &corev1.PersistentVolume{}
		if err := h.get(client.ObjectKeyFromObject(pv), cur); err == nil {
			cur.Finalizers = nil // envtest has no controller to drop pv-protection
			if err := h.admin.Update(h.ctx, cur); err != nil {
				return err
			}
			return fmt.Errorf("PV still there")
		}
		ds := h.csiDaemonSet()
		if ds.Spec.Template.Spec.NodeSelector["hpp"] != "yes" || ds.Spec.Template.Spec.Affinity != nil {
			return fmt.Errorf("nodeSelector %v, affinity %+v", ds.Spec.Template.Spec.NodeSelector, ds.Spec.Template.Spec.Affinity)
		}
		return nil
	})
}

// heldPlacement checks the DaemonSet's required node affinity: the
// workload's selector as one term, the held nodes by name as another.
func heldPlacement(ds *appsv1.DaemonSet, held []string) error {
	pod := ds.Spec.Template.Spec
	if pod.NodeSelector != nil || pod.Affinity == nil || pod.Affinity.NodeAffinity == nil ||
		pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return fmt.Errorf("nodeSelector %v, affinity %+v", pod.NodeSelector, pod.Affinity)
	}
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "hpp", Operator: corev1.NodeSelectorOpIn, Values: []string{"yes"}}}},
		{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: held}}},
	}
	if fmt.Sprint(terms) != fmt.Sprint(want) {
		return fmt.Errorf("terms %+v, want %+v", terms, want)
	}
	return nil
}

// readyCSIPod plays the DaemonSet controller and kubelet (envtest has
// neither): a ready hpp-csi pod on the node.
func (h *harness) readyCSIPod(node string) {
	h.t.Helper()
	ds := &appsv1.DaemonSet{}
	eventually(h.t, "DaemonSet "+render.CSIDaemonSetName, func() error {
		return h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: render.CSIDaemonSetName}, ds)
	})
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.cfg.Namespace, Name: render.CSIDaemonSetName + "-" + node,
			Labels: ds.Spec.Template.Labels,
			// The operator finds node pods by their controller.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "hpp-csi", Image: "hpp-csi"}}},
	}
	h.create(p)
	// Before the harness deletes the CR (cleanups run last first): the
	// finalizer waits for the node pods to go, and no kubelet removes this
	// one; grace 0 deletes it at once.
	h.t.Cleanup(func() {
		if err := h.admin.Delete(context.WithoutCancel(h.ctx), p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			h.t.Errorf("delete pod %s: %v", p.Name, err)
		}
	})
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := h.admin.Status().Update(h.ctx, p); err != nil {
		h.t.Fatal(err)
	}
}
