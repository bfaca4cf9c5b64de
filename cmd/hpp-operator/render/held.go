package render

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// keepOn widens a DaemonSet's placement to the held nodes (Config's
// HeldNodes). The workload's nodeSelector is ANDed with its affinity
// terms, and the terms are ORed, so the selector moves into every term and
// one more term names the held nodes (by metadata.name, as pods are pinned
// elsewhere).
func keepOn(ds *appsv1.DaemonSet, held []string) {
	if len(held) == 0 {
		return
	}
	pod := &ds.Spec.Template.Spec
	if pod.Affinity == nil {
		pod.Affinity = &corev1.Affinity{}
	}
	if pod.Affinity.NodeAffinity == nil {
		pod.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		// No required terms: one term made of the nodeSelector alone (an
		// empty term would match no node).
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, key := range slices.Sorted(maps.Keys(pod.NodeSelector)) {
		req := corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{pod.NodeSelector[key]}}
		for i := range terms {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
		}
	}
	pod.NodeSelector = nil
	terms = append(terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: slices.Sorted(slices.Values(held)),
	}}})
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
}
