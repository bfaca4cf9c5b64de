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

// derive sets the status from the workloads as they are now.
func (r *Reconciler) derive(ctx context.Context, p *pass) {
	p.st.nodes = p.poolNodes
	p.held.report(p.st)
	r.observeWorkloads(ctx, p.cr, p.st)
}

// observeWorkloads reads the DaemonSet of the CR's mode from the cache and
// sets Available/Progressing and the pool statuses from it.
func (r *Reconciler) observeWorkloads(ctx context.Context, cr *hppv1.HostPathProvisioner, st *status) {
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
		var pools []hppv1.StoragePool // the CSI driver's, reported once
		if name == render.CSIDaemonSetName {
			pools = statusPools(&cr.Spec)
		}
		st.fromDaemonSet(ds, pools)
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
