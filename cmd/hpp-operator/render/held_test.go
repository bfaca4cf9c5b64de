package render

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// keepOn must keep the workload's placement (nodeSelector AND each
// affinity term) and add the held nodes as a term of their own.
func TestKeepOnAddsHeldNodesBesideThePlacement(t *testing.T) {
	zone := corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	rack := corev1.NodeSelectorRequirement{Key: "rack", Operator: corev1.NodeSelectorOpExists}
	ds := &appsv1.DaemonSet{}
	pod := &ds.Spec.Template.Spec
	pod.NodeSelector = map[string]string{"hpp": "yes", "disk": "ssd"}
	pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}, {MatchExpressions: []corev1.NodeSelectorRequirement{rack}}},
	}}}
	keepOn(ds, []string{"n2", "n1"})

	sel := []corev1.NodeSelectorRequirement{
		{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}},
		{Key: "hpp", Operator: corev1.NodeSelectorOpIn, Values: []string{"yes"}},
	}
	want := []corev1.NodeSelectorTerm{
		{MatchExpressions: append([]corev1.NodeSelectorRequirement{zone}, sel...)},
		{MatchExpressions: append([]corev1.NodeSelectorRequirement{rack}, sel...)},
		{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1", "n2"}}}},
	}
	got := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if pod.NodeSelector != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("nodeSelector %v, terms\n%+v\nwant\n%+v", pod.NodeSelector, got, want)
	}

	untouched := &appsv1.DaemonSet{}
	untouched.Spec.Template.Spec.NodeSelector = map[string]string{"hpp": "yes"}
	keepOn(untouched, nil)
	if untouched.Spec.Template.Spec.Affinity != nil || len(untouched.Spec.Template.Spec.NodeSelector) != 1 {
		t.Errorf("no held node changed the placement: %+v", untouched.Spec.Template.Spec)
	}
}
