package hostpathprovisioner

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// derive sets the status from the workloads as they are now: the nodes
// held outside the placement, then the DaemonSet of the CR's mode (read
// from the cache) for Available/Progressing, then the pool statuses.
func (r *Reconciler) derive(ctx context.Context, p *pass) {
	cr, st := p.cr, p.st
	// The CSI driver's pools, reported once.
	pools := statusPools(&cr.Spec)
	st.nodes = p.poolNodes
	p.held.report(st)
	// A pathConfig CR is Available when both of its DaemonSets are; the
	// first one not ready sets the conditions.
	names := []string{render.CSIDaemonSetName}
	if cr.Spec.IsLegacy() {
		names = []string{render.LegacyDaemonSetName, render.CSIDaemonSetName}
	}
	for _, name := range names {
		ds := &appsv1.DaemonSet{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: name}, ds); err != nil {
			st.available = false
			st.progress("DaemonSetMissing", fmt.Sprintf("waiting for DaemonSet %s/%s: %v", r.Config.Namespace, name, err))
			return
		}
		st.available = false
		if name == render.CSIDaemonSetName {
			st.fromDaemonSet(ds, pools)
		} else {
			st.fromDaemonSet(ds, nil)
		}
		if !st.available {
			break
		}
	}
	if err := r.observePools(ctx, cr, st); err != nil {
		st.available = false
		st.progress("PoolStatusUnknown", fmt.Sprintf("reading the pools' claims and mounters: %v", err))
	}
}

// statusPools are the pools the status reports: a pathConfig CR's one pool
// is "legacy" (render/pathconfig.go), as upstream reports it.
func statusPools(spec *hppv1.HostPathProvisionerSpec) []hppv1.StoragePool {
	if spec.IsLegacy() {
		return []hppv1.StoragePool{{Name: contract.DefaultPool, Path: spec.PathConfig.Path}}
	}
	return spec.StoragePools
}
