package hostpathprovisioner

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/driverpv"
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
		for _, node := range driverpv.PinnedNodes(pv) {
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

// nodes are the held nodes, sorted.
func (h heldNodes) nodes() []string { return slices.Sorted(maps.Keys(h)) }

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
