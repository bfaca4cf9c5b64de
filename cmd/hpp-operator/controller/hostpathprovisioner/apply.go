package hostpathprovisioner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/adopt"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// apply writes what render built: the objects, then the pools (overlay
// StorageClasses, claims, mounters, retired mounters), then removes the
// other mode's objects and what upstream's operator left that hpp does
// not make.
func (r *Reconciler) apply(ctx context.Context, p *pass) error {
	a := &applier{reader: r.Client, live: r.APIReader, writer: r.Client, scheme: r.Scheme,
		kept: func(obj *unstructured.Unstructured, fields []string) {
			// A kept selector changes nothing the pods do; a kept
			// CSIDriver field leaves out a feature of hpp's.
			typ := corev1.EventTypeNormal
			if !slices.Equal(fields, []string{"spec.selector"}) {
				typ = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(p.cr, nil, typ, "ImmutableFieldsKept", reconcileAction, "%s %s keeps %s of the live object (immutable; kept rather than replaced, so nothing restarts at once)",
				obj.GetKind(), obj.GetName(), strings.Join(fields, ", "))
		}}
	for _, obj := range p.want {
		if err := r.applyOwned(ctx, p, a, obj); err != nil {
			return err
		}
	}
	if err := r.reconcilePools(ctx, p, a); err != nil {
		p.st.degrade("ApplyFailed", err.Error())
		return err
	}
	for _, obj := range p.gone {
		if err := r.deleteIfPresent(ctx, p.log, obj); err != nil {
			return err
		}
	}
	return r.removeUpstreamLeftovers(ctx, p)
}

// applyOwned applies obj with the CR as its owner (the CSIDriver excepted:
// it must outlive the CR while PVs of the driver exist, see finalize). A
// DaemonSet or Deployment of another installation keeps its selector
// (adopt.Object): it is never deleted and recreated, so its pods roll.
func (r *Reconciler) applyOwned(ctx context.Context, p *pass, a *applier, obj client.Object) error {
	if _, isDriver := obj.(*storagev1.CSIDriver); !isDriver {
		if err := controllerutil.SetControllerReference(p.cr, obj, r.Scheme); err != nil {
			return err
		}
	}
	wrote, err := a.apply(ctx, obj)
	if err != nil {
		p.st.degrade("ApplyFailed", err.Error())
		return err
	}
	if wrote {
		p.log.Info("applied", "kind", obj.GetObjectKind().GroupVersionKind().Kind, "name", obj.GetName())
	}
	return nil
}

// reconcilePools writes what render built for the pvcTemplate pools: the
// overlay StorageClasses, for every pool and node the claim and the
// mounter Deployment, and retires the mounters no longer wanted (node
// left, pool removed, mode switched) with a cleanup Job.
func (r *Reconciler) reconcilePools(ctx context.Context, p *pass, a *applier) error {
	if err := r.ensureOverlayClasses(ctx, p); err != nil {
		return err
	}
	for _, claim := range p.claims {
		if err := r.ensureClaim(ctx, p.log, claim); err != nil {
			return err
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

// ensureOverlayClasses creates upstream's backend StorageClass of each
// shared pool, only when missing (as upstream: an administrator may tune
// it). Two pools that want the same class name, or a class of that name
// that serves another pool, are reported instead of silently sharing it.
func (r *Reconciler) ensureOverlayClasses(ctx context.Context, p *pass) error {
	claimedBy := map[string]string{}
	for _, o := range p.overlays {
		name := o.class.Name
		if other, dup := claimedBy[name]; dup {
			r.reportOverlayConflict(p.cr, p.st, fmt.Sprintf("storage pools %q and %q both use overlay StorageClass %q: set a distinct spec.storagePools[].overlayClassName for %q", other, o.pool, name, o.pool))
			continue
		}
		claimedBy[name] = o.pool
		live := &storagev1.StorageClass{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, live)
		if err == nil {
			if sp := live.Parameters[contract.ParamStoragePool]; live.Provisioner != contract.DriverName || sp != o.pool {
				r.reportOverlayConflict(p.cr, p.st, fmt.Sprintf("StorageClass %q exists for provisioner %s, "+contract.ParamStoragePool+" %q, not for storage pool %q: rename it or set spec.storagePools[].overlayClassName", name, live.Provisioner, sp, o.pool))
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if err := controllerutil.SetControllerReference(p.cr, o.class, r.Scheme); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, o.class); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create overlay StorageClass %s: %w", name, err)
		}
	}
	return nil
}

func (r *Reconciler) reportOverlayConflict(cr *hppv1.HostPathProvisioner, st *status, msg string) {
	if st.conds[hppv1.ConditionDegraded].reason != "OverlayClassConflict" {
		r.Recorder.Eventf(cr, nil, corev1.EventTypeWarning, "OverlayClassConflict", reconcileAction, "%s", msg)
	}
	st.degrade("OverlayClassConflict", msg)
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

// removeUpstreamLeftovers deletes what upstream's operator made for the CR
// and hpp does not make (adopt.Leftovers). Cluster-scoped kinds are listed
// from the API server, once per CR and operator start (a takeover leaves
// them once; the steady state reads only the cache).
func (r *Reconciler) removeUpstreamLeftovers(ctx context.Context, p *pass) error {
	l := adopt.Leftovers{Cache: r.Client, Scheme: r.Scheme, Namespace: r.Config.Namespace,
		PrometheusOperator: r.Config.PrometheusOperator, OpenShift: r.Config.OpenShift}
	sweepCluster := !r.clusterSwept(p.cr.UID)
	if sweepCluster {
		l.Live = r.liveReader()
	}
	left, err := l.Find(ctx, p.cr, p.want)
	if err != nil {
		return err
	}
	for _, obj := range left {
		if err := r.deleteIfPresent(ctx, p.log, obj); err != nil {
			return err
		}
		r.Recorder.Eventf(p.cr, nil, corev1.EventTypeNormal, "UpstreamObjectRemoved", reconcileAction, "%s %s was made by upstream's operator and has no counterpart in hpp: deleted", adopt.KindOf(r.Scheme, obj), obj.GetName())
	}
	if sweepCluster && r.swept != nil {
		r.swept.Store(p.cr.UID, true)
	}
	return nil
}

func (r *Reconciler) clusterSwept(uid types.UID) bool {
	if r.swept == nil {
		return false
	}
	_, ok := r.swept.Load(uid)
	return ok
}
