package controller_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestTakeoverOfUpstreamObjects: objects the upstream operator left (same
// names, its labels, a DaemonSet selector with a version label) are adopted
// or replaced in place.
func TestTakeoverOfUpstreamObjects(t *testing.T) {
	const ns = "hpp-takeover"
	upstream := map[string]string{"k8s-app": "hostpath-provisioner", "app.kubernetes.io/version": "v0.20.0"}
	h := startWith(t, ns, options{setup: func(admin client.Client) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: render.CSIServiceAccount, Namespace: ns, Labels: upstream}}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: render.CSIDaemonSetName, Namespace: ns, Labels: upstream},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: upstream},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: upstream},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "hostpath-provisioner", Image: "quay.io/kubevirt/hostpath-csi-driver:v0.20.0"}}},
				},
			},
		}
		for _, o := range []client.Object{sa, ds} {
			if err := admin.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
	}})
	if err := h.admin.Create(h.ctx, poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpvolumes"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "upstream DaemonSet replaced", func() error {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
			return err
		}
		if sel := ds.Spec.Selector.MatchLabels; len(sel) != 1 || sel[render.AppLabel] != render.CSIDaemonSetName {
			return fmt.Errorf("selector %v", sel)
		}
		if ds.Spec.Template.Spec.Containers[0].Image != "localhost/hpp-csi:test" {
			return fmt.Errorf("image %s", ds.Spec.Template.Spec.Containers[0].Image)
		}
		return nil
	})
	sa := &corev1.ServiceAccount{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIServiceAccount}, sa); err != nil {
		t.Fatal(err)
	}
	if sa.Labels[render.ManagedByLabel] != "hpp-operator" || len(sa.OwnerReferences) != 1 || sa.OwnerReferences[0].Name != "hpp" {
		t.Errorf("ServiceAccount not adopted: labels %v owners %v", sa.Labels, sa.OwnerReferences)
	}
}

// TestMissingPriorityClassDegradesInsteadOfBlockingPods.
func TestMissingPriorityClassDegradesInsteadOfBlockingPods(t *testing.T) {
	const ns = "hpp-priority"
	h := startWith(t, ns, options{config: func(c *render.Config) { c.PriorityClassName = "hpp-node-critical" }})
	if err := h.admin.Create(h.ctx, poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpvolumes"})); err != nil {
		t.Fatal(err)
	}
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
	if err := h.admin.Create(h.ctx, pc); err != nil {
		t.Fatal(err)
	}
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
