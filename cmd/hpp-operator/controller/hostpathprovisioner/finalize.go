package hostpathprovisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// CleanupTimeout bounds how long the finalizer retries a failing cleanup
// before it lets the CR go (with a warning event naming what is left), so a
// deletion never blocks forever.
const CleanupTimeout = 10 * time.Minute

// finalize removes what the operator made, node pods first (nothing may
// provision while its permissions go), then identities and permissions. The
// CSIDriver stays while PVs of the driver exist: kubelet needs it to
// unmount them. No data directory is ever touched.
func (r *Reconciler) finalize(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cr, Finalizer) && !controllerutil.ContainsFinalizer(cr, oldFinalizer) {
		return ctrl.Result{}, nil
	}
	err := r.cleanup(ctx, log, cr)
	if errors.Is(err, errRetry) && time.Since(cr.DeletionTimestamp.Time) < CleanupTimeout {
		// Waiting for cleanup Jobs: progress, not a failure. Their status
		// changes trigger a reconcile; the requeue only bounds a missed one.
		st := newStatus(cr, r.Config.Version)
		st.progress("CleaningUp", err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, r.writeStatus(ctx, cr, st)
	}
	if err != nil && time.Since(cr.DeletionTimestamp.Time) < CleanupTimeout {
		st := newStatus(cr, r.Config.Version)
		st.degrade("CleanupFailed", fmt.Sprintf("removing the operator's objects failed (retrying until %s after deletion, then giving up): %v", CleanupTimeout, err))
		return ctrl.Result{}, errorsJoin(err, r.writeStatus(ctx, cr, st))
	}
	if err != nil {
		clusterKinds := "clusterrole,clusterrolebinding"
		if r.Config.OpenShift {
			clusterKinds += ",securitycontextconstraints"
		}
		r.Recorder.Eventf(cr, nil, corev1.EventTypeWarning, "CleanupAbandoned", reconcileAction, "gave up removing the operator's objects after %s: %v; remove what is left by hand: kubectl delete daemonset,serviceaccount,role,rolebinding -n %s -l %s=%s; kubectl delete %s -l %s=%s",
			CleanupTimeout, err, r.Config.Namespace, render.ManagedByLabel, r.Config.ManagedBy, clusterKinds, render.ManagedByLabel, r.Config.ManagedBy)
		log.Error(err, "cleanup abandoned")
	}
	r.setReady(false)
	patch := client.MergeFrom(cr.DeepCopy())
	controllerutil.RemoveFinalizer(cr, Finalizer)
	controllerutil.RemoveFinalizer(cr, oldFinalizer) // set by an earlier hpp
	if err := r.Client.Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) cleanup(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner) error {
	// Pools first: their cleanup Jobs run as the CSI driver's
	// ServiceAccount, which must outlive them.
	running, failed, err := r.teardownPools(ctx, log, cr)
	if err != nil {
		return err
	}
	if len(running) > 0 {
		return fmt.Errorf("waiting for pool cleanup Job(s) to unmount (each stops after %ds): %s: %w",
			render.CleanupDeadlineSeconds, strings.Join(running, "; "), errRetry)
	}
	if len(failed) > 0 {
		r.Recorder.Eventf(cr, nil, corev1.EventTypeWarning, "PoolCleanupIncomplete", reconcileAction, "pool cleanup Job(s) failed, these pools may still be mounted: %s; unmount them by hand (umount <path>/csi on the node); the pool PVCs are kept",
			strings.Join(failed, "; "))
	}
	ns := r.Config.Namespace
	for _, ds := range []string{render.CSIDaemonSetName, render.LegacyDaemonSetName} {
		if err := r.deleteIfOwned(ctx, log, cr, &appsv1.DaemonSet{ObjectMeta: objMeta(ds, ns)}); err != nil {
			return err
		}
	}
	if err := r.deleteIfOwned(ctx, log, cr, &appsv1.Deployment{ObjectMeta: objMeta(render.ResizerName, ns)}); err != nil {
		return err
	}
	// Node pods outlive their DaemonSet by their grace period, and their
	// csi-provisioner keeps writing CSIStorageCapacity objects until it
	// stops: permissions go only once no node pod is left (seen on the
	// real node as 403s in the audit log, test/onnode). Bounded like the
	// rest: past CleanupTimeout (a pod stuck on a dead node) they go anyway.
	if left, err := r.nodePodsLeft(ctx); err != nil {
		return err
	} else if left > 0 && time.Since(cr.DeletionTimestamp.Time) < CleanupTimeout {
		return fmt.Errorf("waiting for %d node pod(s) to stop before removing their permissions: %w", left, errRetry)
	}
	objs := []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: objMeta(render.CSIServiceAccount, ns)},
		&rbacv1.Role{ObjectMeta: objMeta(render.CSIServiceAccount, ns)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: objMeta(render.CSIServiceAccount, "")},
		&rbacv1.ClusterRole{ObjectMeta: objMeta(render.CSIServiceAccount, "")},
		&rbacv1.ClusterRoleBinding{ObjectMeta: objMeta(render.LegacyDaemonSetName, "")},
		&rbacv1.ClusterRole{ObjectMeta: objMeta(render.LegacyDaemonSetName, "")},
		&corev1.ServiceAccount{ObjectMeta: objMeta(render.CSIServiceAccount, ns)},
		&corev1.ServiceAccount{ObjectMeta: objMeta(render.LegacyServiceAccount, ns)},
		&rbacv1.RoleBinding{ObjectMeta: objMeta(render.ResizerName, ns)},
		&rbacv1.Role{ObjectMeta: objMeta(render.ResizerName, ns)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: objMeta(render.ResizerName, "")},
		&rbacv1.ClusterRole{ObjectMeta: objMeta(render.ResizerName, "")},
		&corev1.ServiceAccount{ObjectMeta: objMeta(render.ResizerName, ns)},
	}
	// The monitoring objects and SCCs are removed as rendered: one list of
	// names.
	objs = append(objs, r.Config.MonitoringObjects()...)
	objs = append(objs, r.Config.AllSCCs()...)
	for _, o := range objs {
		if err := r.deleteIfOwned(ctx, log, cr, o); err != nil {
			return err
		}
	}
	return r.releaseCSIDriver(ctx, cr)
}

// nodePodsLeft counts the pods of the node DaemonSets (by their owner, as
// adopted pods carry upstream's labels) and of csi-resizer's Deployment (its
// leader election writes until it stops; by its app label), from the cache.
func (r *Reconciler) nodePodsLeft(ctx context.Context) (int, error) {
	n := 0
	for _, ds := range []string{render.CSIDaemonSetName, render.LegacyDaemonSetName} {
		pods, err := r.nodePods(ctx, ds)
		if err != nil {
			return 0, err
		}
		n += len(pods)
	}
	resizer := &corev1.PodList{}
	if err := r.Client.List(ctx, resizer, client.InNamespace(r.Config.Namespace), client.MatchingLabels{render.AppLabel: render.ResizerName}); err != nil {
		return 0, fmt.Errorf("list csi-resizer pods: %w", err)
	}
	return n + len(resizer.Items), nil
}

// deleteIfOwned deletes an object the CR owns; anything else of the same
// name (made by someone else) is left alone.
func (r *Reconciler) deleteIfOwned(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner, obj client.Object) error {
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !metav1.IsControlledBy(obj, cr) {
		return nil
	}
	return r.deleteIfPresent(ctx, log, obj)
}

// releaseCSIDriver deletes the CSIDriver the operator made once no PV of
// the driver is left; until then it says why it stays. With cr nil (the CR
// is gone) it only acts if no HostPathProvisioner exists at all.
func (r *Reconciler) releaseCSIDriver(ctx context.Context, cr *hppv1.HostPathProvisioner) error {
	drv := &storagev1.CSIDriver{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: contract.DriverName}, drv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if drv.Labels[render.ManagedByLabel] != r.Config.ManagedBy || !drv.DeletionTimestamp.IsZero() {
		return nil
	}
	if cr == nil {
		list := &hppv1.HostPathProvisionerList{}
		if err := r.Client.List(ctx, list); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return nil
		}
	}
	n, err := countDriverPVs(ctx, r.Client)
	if err != nil {
		return err
	}
	if n > 0 {
		if cr != nil {
			r.Recorder.Eventf(cr, nil, corev1.EventTypeWarning, "CSIDriverKept", reconcileAction, "%d PersistentVolume(s) of %s still exist: the CSIDriver object stays until they are deleted (kubelet needs it to unmount them); the operator deletes it then, or delete it by hand to force",
				n, contract.DriverName)
		}
		return nil
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, drv))
}

// countDriverPVs counts the PVs of the CSI driver (from the cache).
func countDriverPVs(ctx context.Context, c client.Reader) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := c.List(ctx, pvs); err != nil {
		return 0, err
	}
	n := 0
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == contract.DriverName {
			n++
		}
	}
	return n, nil
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}
