package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// heldNodes are the nodes outside spec.workload's placement that still
// hold PVs of the driver: per node, the number of volumes per pool. The
// CSI driver must stay there, or those volumes could never be unpublished,
// measured or deleted, and their data would be stranded.
type heldNodes map[string]map[string]int

// findHeldNodes counts, in one pass over the driver's PVs (cached in
// full), the volumes pinned to nodes that exist and are not in the
// placement.
func findHeldNodes(ctx context.Context, c client.Reader, placement nodeSet) (heldNodes, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, err
	}
	outside := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !placement.stay[n.Name] && n.DeletionTimestamp.IsZero() {
			outside[n.Name] = true
		}
	}
	held := heldNodes{}
	if len(outside) == 0 {
		return held, nil
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := c.List(ctx, pvs); err != nil {
		return nil, err
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		for _, node := range pinnedNodes(pv) {
			if !outside[node] {
				continue
			}
			if held[node] == nil {
				held[node] = map[string]int{}
			}
			held[node][pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool]]++
		}
	}
	return held, nil
}

// keepCSIOn widens the CSI DaemonSet's placement to the held nodes. The
// workload's nodeSelector is ANDed with its affinity terms, and the terms
// are ORed, so the selector moves into every term and one more term names
// the held nodes (by metadata.name, as pods are pinned elsewhere).
func keepCSIOn(ds *appsv1.DaemonSet, held heldNodes) {
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
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: slices.Sorted(maps.Keys(held)),
	}}})
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
}

// report puts every held node in the status of the pools it holds volumes
// of, with the reason the driver stays there.
func (h heldNodes) report(st *status) {
	for _, node := range slices.Sorted(maps.Keys(h)) {
		for _, pool := range slices.Sorted(maps.Keys(h[node])) {
			st.keep(pool, node, fmt.Sprintf(
				"node %s left spec.workload's placement but holds %d volume(s) of pool %q: hpp-csi (and the pool's mounter, if any) stays there until they are deleted or moved",
				node, h[node][pool], pool))
		}
	}
}

// holdCSIDaemonSet applies keepCSIOn to the CSI DaemonSet among the
// objects to apply, and reports the held nodes.
func (r *Reconciler) holdCSIDaemonSet(ctx context.Context, placement nodeSet, want []client.Object, st *status) error {
	held, err := findHeldNodes(ctx, r.Client, placement)
	if err != nil {
		return err
	}
	for _, obj := range want {
		if ds, ok := obj.(*appsv1.DaemonSet); ok && ds.Name == render.CSIDaemonSetName {
			keepCSIOn(ds, held)
		}
	}
	st.held = held
	held.report(st)
	return nil
}
