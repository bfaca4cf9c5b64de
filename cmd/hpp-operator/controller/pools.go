package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// reconcilePools writes what render built for the pvcTemplate pools: the
// overlay StorageClasses, for every pool and node the claim and the
// mounter Deployment, and retires the mounters no longer wanted (node
// left, pool removed, mode switched) with a cleanup Job.
func (r *Reconciler) reconcilePools(ctx context.Context, p *pass, a *applier) error {
	if err := r.ensureOverlayClasses(ctx, p.cfg, p.cr, p.pools, p.st); err != nil {
		return err
	}
	for i := range p.pools {
		if pool := &p.pools[i]; render.IsSharedPool(pool) {
			if err := r.ensureClaim(ctx, p.log, p.cfg.PoolClaim(pool, "")); err != nil {
				return err
			}
		}
	}
	for _, m := range p.mounters {
		if m.claim != nil {
			if err := r.ensureClaim(ctx, p.log, m.claim); err != nil {
				return err
			}
		}
		if err := r.applyOwned(ctx, p, a, m.deployment); err != nil {
			return err
		}
	}
	return r.retireMounters(ctx, p)
}

// poolNodes returns, sorted, the nodes a pool is mounted on: where the CSI
// driver would start, and where its mounter already runs and may stay.
func (r *Reconciler) poolNodes(ctx context.Context, pool string, set nodeSet) ([]string, error) {
	var out []string
	for node := range set.stay {
		if set.run[node] {
			out = append(out, node)
			continue
		}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: render.MounterName(pool, node)}, &appsv1.Deployment{})
		if err == nil {
			out = append(out, node)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// ensureClaim creates a pool PVC that does not exist. An existing one is
// left as it is: a claim's spec is immutable once bound, and it holds data.
func (r *Reconciler) ensureClaim(ctx context.Context, log logr.Logger, pvc *corev1.PersistentVolumeClaim) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	err = r.Client.Create(ctx, pvc)
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache had not seen it yet
	}
	if err != nil {
		return fmt.Errorf("create pool PVC %s: %w", pvc.Name, err)
	}
	log.Info("created pool claim", "name", pvc.Name)
	return nil
}

// ensureOverlayClasses creates upstream's backend StorageClass of each
// shared pool, only when missing (as upstream: an administrator may tune
// it). Two pools that want the same class name, or a class of that name
// that serves another pool, are reported instead of silently sharing it.
func (r *Reconciler) ensureOverlayClasses(ctx context.Context, cfg render.Config, cr *hppv1.HostPathProvisioner, pools []hppv1.StoragePool, st *status) error {
	claimedBy := map[string]string{}
	for i := range pools {
		p := &pools[i]
		if !render.IsSharedPool(p) {
			continue
		}
		name := render.OverlayClassName(p)
		if other, dup := claimedBy[name]; dup {
			r.reportOverlayConflict(cr, st, fmt.Sprintf("storage pools %q and %q both use overlay StorageClass %q: set a distinct spec.storagePools[].overlayClassName for %q", other, p.Name, name, p.Name))
			continue
		}
		claimedBy[name] = p.Name
		live := &storagev1.StorageClass{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, live)
		if err == nil {
			if sp := live.Parameters[contract.ParamStoragePool]; live.Provisioner != contract.DriverName || sp != p.Name {
				r.reportOverlayConflict(cr, st, fmt.Sprintf("StorageClass %q exists for provisioner %s, storagePool %q, not for storage pool %q: rename it or set spec.storagePools[].overlayClassName", name, live.Provisioner, sp, p.Name))
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		sc := cfg.OverlayStorageClass(p)
		if err := controllerutil.SetControllerReference(cr, sc, r.Scheme); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create overlay StorageClass %s: %w", name, err)
		}
	}
	return nil
}

func (r *Reconciler) reportOverlayConflict(cr *hppv1.HostPathProvisioner, st *status, msg string) {
	if st.conds[hppv1.ConditionDegraded].reason != "OverlayClassConflict" {
		r.eventf(cr, corev1.EventTypeWarning, "OverlayClassConflict", "%s", msg)
	}
	st.degrade("OverlayClassConflict", msg)
}

// retireMounters removes the mounter Deployments render did not build,
// each after its cleanup Job exists. A node that left the CR's placement
// but still exists and holds volumes of the pool keeps its mounter
// (untouched, so it is not rescheduled away): unmounting would strand
// those volumes, so it is reported instead (derive).
func (r *Reconciler) retireMounters(ctx context.Context, p *pass) error {
	deps, err := r.poolDeployments(ctx, p.cr)
	if err != nil {
		return err
	}
	wanted := p.wantedMounters()
	for i := range deps {
		d := &deps[i]
		if wanted[d.Name] {
			continue
		}
		pool, _, node := mounterOrigin(d)
		if p.inSpec(pool) && p.holds(node, pool) {
			continue
		}
		if p.inSpec(pool) {
			// Retiring unmounts the pool: confirm from the API server that
			// no volume is there, since the cache may not hold a PV just
			// created.
			n, err := r.poolVolumesOnNodeLive(ctx, pool, node)
			if err != nil {
				return err
			}
			if n > 0 {
				continue // reported once the cache holds it (the PV's creation reconciles again)
			}
		}
		if err := r.retireMounter(ctx, p.log, p.cfg, p.cr, d); err != nil {
			return err
		}
	}
	return r.tidyCleanupJobs(ctx, p.log, p.cr, p.st)
}

// poolVolumesOnNodeLive counts, from the API server, the PVs of the pool
// pinned to the node.
func (r *Reconciler) poolVolumesOnNodeLive(ctx context.Context, pool, node string) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.liveReader().List(ctx, pvs); err != nil {
		return 0, fmt.Errorf("list PVs before unmounting pool %q on node %s: %w", pool, node, err)
	}
	n := 0
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if slices.Contains(pinnedNodes(pv), node) && pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool] == pool {
			n++
		}
	}
	return n, nil
}
