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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// reconcilePools makes, for every pvcTemplate pool and every node the CSI
// driver runs on, the pool PVC and the mounter Deployment, and retires the
// mounters that are no longer wanted (node left, pool removed, mode
// switched) with a cleanup Job. pools is nil for a pathConfig CR.
func (r *Reconciler) reconcilePools(ctx context.Context, log logr.Logger, cfg render.Config, cr *hppv1.HostPathProvisioner, pools []hppv1.StoragePool, set nodeSet, a *applier, st *status) error {
	if err := r.ensureOverlayClasses(ctx, cfg, cr, pools, st); err != nil {
		return err
	}
	wanted := map[string]bool{}
	for i := range pools {
		p := &pools[i]
		if !render.IsTemplatePool(p) {
			continue
		}
		if render.IsSharedPool(p) {
			if err := r.ensureClaim(ctx, log, cfg.PoolClaim(p, "")); err != nil {
				return err
			}
		}
		nodes, err := r.poolNodes(ctx, p.Name, set)
		if err != nil {
			return err
		}
		st.setPoolNodes(p.Name, nodes)
		for _, node := range nodes {
			if !render.IsSharedPool(p) {
				if err := r.ensureClaim(ctx, log, cfg.PoolClaim(p, node)); err != nil {
					return err
				}
			}
			dep := cfg.MounterDeployment(&cr.Spec, p, node)
			wanted[dep.Name] = true
			if err := r.applyOwned(ctx, log, cr, a, dep, st); err != nil {
				return err
			}
		}
	}
	return r.retireMounters(ctx, log, cfg, cr, pools, wanted, st)
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

// poolDeployments lists the mounter Deployments the CR controls.
func (r *Reconciler) poolDeployments(ctx context.Context, cr *hppv1.HostPathProvisioner) ([]appsv1.Deployment, error) {
	list := &appsv1.DeploymentList{}
	err := r.Client.List(ctx, list, r.poolObjects()...)
	return controlledBy(list.Items, cr), err
}

// poolObjects selects the namespaced objects of pvcTemplate pools.
func (r *Reconciler) poolObjects() []client.ListOption {
	return []client.ListOption{client.InNamespace(r.Config.Namespace), client.HasLabels{contract.PoolLabel}}
}

// controlledBy keeps the items the owner controls.
func controlledBy[T any, P interface {
	*T
	metav1.Object
}](items []T, owner metav1.Object) []T {
	out := items[:0]
	for i := range items {
		if metav1.IsControlledBy(P(&items[i]), owner) {
			out = append(out, items[i])
		}
	}
	return out
}

// retireMounters removes the mounter Deployments not in wanted, each after
// its cleanup Job exists. A node that left the CR's placement but still
// exists and holds volumes of the pool keeps its mounter (untouched, so it
// is not rescheduled away): unmounting would strand those volumes, so it is
// reported instead.
func (r *Reconciler) retireMounters(ctx context.Context, log logr.Logger, cfg render.Config, cr *hppv1.HostPathProvisioner, pools []hppv1.StoragePool, wanted map[string]bool, st *status) error {
	deps, err := r.poolDeployments(ctx, cr)
	if err != nil {
		return err
	}
	for i := range deps {
		d := &deps[i]
		if wanted[d.Name] {
			continue
		}
		pool, _, node := mounterOrigin(d)
		inSpec := slices.ContainsFunc(pools, func(p hppv1.StoragePool) bool { return p.Name == pool && render.IsTemplatePool(&p) })
		if inSpec && st.held[node][pool] > 0 {
			continue // reported with the held nodes (heldnodes.go)
		}
		if inSpec {
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
		if err := r.retireMounter(ctx, log, cfg, cr, d); err != nil {
			return err
		}
	}
	return r.tidyCleanupJobs(ctx, log, cr, st)
}

// poolVolumesOnNodeLive counts, from the API server, the PVs of the pool
// pinned to the node.
func (r *Reconciler) poolVolumesOnNodeLive(ctx context.Context, pool, node string) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	live := r.APIReader
	if live == nil { // a Reconciler not set up with a manager (unit tests)
		live = r.Client
	}
	if err := live.List(ctx, pvs); err != nil {
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

// pinnedNodes are the nodes a PV of the driver is pinned to by the
// driver's topology key (none for another driver's PV).
func pinnedNodes(pv *corev1.PersistentVolume) []string {
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
