// Package driverpv reads what both of the operator's controllers need to
// know about a PersistentVolume of hpp's CSI driver: the nodes it is
// pinned to.
package driverpv

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// PinnedNodes are the nodes a PV of the driver is pinned to by the
// driver's topology key (none for another driver's PV).
func PinnedNodes(pv *corev1.PersistentVolume) []string {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != contract.DriverName || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var out []string
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == contract.TopologyKey {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}
