// Package controller is the HostPathProvisioner reconciler: from the one CR
// it applies the objects package render builds, reports status, and cleans
// up on deletion.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Finalizer holds the CR until the operator has removed what it made.
const Finalizer = "hostpathprovisioner.kubevirt.io/cleanup"

// EventRecorder is the part of client-go's events.EventRecorder used here.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles HostPathProvisioner objects.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server what the cache does not hold: an
	// object of another installation about to be taken over. Nil: the
	// manager's (SetupWithManager).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Config    render.Config
	Recorder  EventRecorder
	Log       logr.Logger
}

// Reconcile brings the cluster to the CR's desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := r.Log.WithValues("cr", req.Name)
	if req.Name == releaseRequest {
		return ctrl.Result{}, r.releaseCSIDriver(ctx, nil)
	}
	cr := &hppv1.HostPathProvisioner{}
	if err := r.Client.Get(ctx, req.NamespacedName, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.releaseCSIDriver(ctx, nil)
		}
		return ctrl.Result{}, err
	}
	if !cr.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, log, cr)
	}
	if !controllerutil.ContainsFinalizer(cr, Finalizer) || controllerutil.ContainsFinalizer(cr, UpstreamFinalizer) {
		patch := client.MergeFrom(cr.DeepCopy())
		controllerutil.AddFinalizer(cr, Finalizer)
		// A CR taken over from the upstream operator holds its finalizer,
		// which nothing would ever remove: the CR could not be deleted.
		controllerutil.RemoveFinalizer(cr, UpstreamFinalizer)
		if err := r.Client.Patch(ctx, cr, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	st := newStatus(cr, r.Config.Version)
	st.checkDowngrade(cr.Status.ObservedVersion)
	applyErr := r.applyAll(ctx, log, cr, st)
	if applyErr == nil {
		r.observeWorkloads(ctx, cr, st)
	}
	if err := r.writeStatus(ctx, cr, st); err != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	if applyErr != nil {
		return ctrl.Result{}, applyErr
	}
	if st.progressing() {
		// DaemonSet status changes also trigger a reconcile; this only
		// bounds how stale the status can get if an event is missed.
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	return ctrl.Result{}, nil
}

// applyAll applies the objects of the CR's mode and removes those of the
// other mode (a CR switched from pathConfig to storagePools, or back).
func (r *Reconciler) applyAll(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner, st *status) error {
	blocking, strict := hppv1.ValidateStored(&cr.Spec)
	if len(blocking) > 0 {
		// The CRD's rules and the webhook normally stop this; a CR written
		// while neither was in place lands here and is not acted on.
		st.degrade("InvalidSpec", blocking.ToAggregate().Error())
		return nil
	}
	// A CR upstream's operator accepted keeps running; what hpp would
	// refuse on a change is reported, not enforced.
	st.warnSpec(strict)
	cfg, err := r.checkPriorityClass(ctx, st)
	if err != nil {
		return err
	}
	// A pathConfig CR runs the legacy provisioner and, as upstream's
	// operator does, the CSI driver beside it: its pool "legacy" is
	// <path>/csi, and the PVs hpp-migrate moves from the legacy provisioner
	// are served in place from <path> (render/pathconfig.go). A pools CR
	// runs the CSI driver only.
	want, err := cfg.CSIObjects(&cr.Spec)
	if err != nil {
		return err
	}
	var gone []client.Object
	if cr.Spec.IsLegacy() {
		want = append(cfg.LegacyObjects(&cr.Spec), want...)
	} else {
		gone = r.legacyObjects()
	}
	// Where the CSI driver runs, once per reconcile: the held nodes and
	// the pvcTemplate pools both follow it.
	placement, err := csiNodes(ctx, r.Client, &cr.Spec.Workload)
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	if err := r.holdCSIDaemonSet(ctx, placement, want, st); err != nil {
		return err
	}
	want = append(want, cfg.MonitoringObjects()...)
	// SCCs first: OpenShift admits a node pod only if its SCC exists.
	want = append(cfg.SCCs(&cr.Spec), want...)
	a := &applier{reader: r.Client, live: r.APIReader, writer: r.Client, scheme: r.Scheme,
		kept: func(obj *unstructured.Unstructured, fields []string) {
			r.eventf(cr, corev1.EventTypeWarning, "ImmutableFieldsKept",
				"%s %s keeps %s of another installation (immutable); delete it while no pod uses the driver and the operator recreates it with hpp's values",
				obj.GetKind(), obj.GetName(), strings.Join(fields, ", "))
		}}
	for _, obj := range want {
		if err := r.applyOwned(ctx, log, cr, a, obj, st); err != nil {
			return err
		}
	}
	var pools []hppv1.StoragePool
	if !cr.Spec.IsLegacy() {
		pools = cr.Spec.StoragePools
	}
	if err := r.reconcilePools(ctx, log, cfg, cr, pools, placement, a, st); err != nil {
		if !errors.Is(err, errRetry) {
			st.degrade("ApplyFailed", err.Error())
		}
		return err
	}
	for _, obj := range gone {
		if err := r.deleteIfPresent(ctx, log, obj); err != nil {
			return err
		}
	}
	return nil
}

// applyOwned applies obj with the CR as its owner (the CSIDriver excepted:
// it must outlive the CR while PVs of the driver exist, see finalize).
func (r *Reconciler) applyOwned(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner, a *applier, obj client.Object, st *status) error {
	if _, isDriver := obj.(*storagev1.CSIDriver); !isDriver {
		if err := controllerutil.SetControllerReference(cr, obj, r.Scheme); err != nil {
			return err
		}
	}
	wrote, err := a.apply(ctx, obj)
	if isWorkload(obj) && apierrors.IsInvalid(err) && strings.Contains(err.Error(), "selector") {
		// A DaemonSet or Deployment of the same name with another selector
		// (the upstream operator's, which held a version label or only the
		// pool name) cannot be updated in place: replace it. Pods restart;
		// volumes stay mounted and their data is untouched.
		kind := obj.GetObjectKind().GroupVersionKind().Kind // render sets TypeMeta
		r.eventf(cr, corev1.EventTypeNormal, kind+"Replaced",
			"%s %s/%s had an immutable selector of another installation; replacing it", kind, obj.GetNamespace(), obj.GetName())
		old := obj.DeepCopyObject().(client.Object)
		if derr := r.Client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground)); derr != nil && !apierrors.IsNotFound(derr) {
			return derr
		}
		st.progress("Replacing", fmt.Sprintf("replacing %s %s/%s", kind, obj.GetNamespace(), obj.GetName()))
		return fmt.Errorf("replacing %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), errRetry)
	}
	if err != nil {
		st.degrade("ApplyFailed", err.Error())
		return err
	}
	if wrote {
		log.Info("applied", "kind", obj.GetObjectKind().GroupVersionKind().Kind, "name", obj.GetName())
	}
	return nil
}

func isWorkload(obj client.Object) bool {
	switch obj.(type) {
	case *appsv1.DaemonSet, *appsv1.Deployment:
		return true
	}
	return false
}

// errRetry marks a reconcile that made progress and must run again.
var errRetry = errors.New("retrying")

// checkPriorityClass returns the configuration to render with: without
// the configured PriorityClass, pods would never schedule, so they run
// without one and Degraded says why.
func (r *Reconciler) checkPriorityClass(ctx context.Context, st *status) (render.Config, error) {
	cfg := r.Config
	if cfg.PriorityClassName == "" {
		return cfg, nil
	}
	err := r.Client.Get(ctx, client.ObjectKey{Name: cfg.PriorityClassName}, &schedulingv1.PriorityClass{})
	if apierrors.IsNotFound(err) {
		st.degrade("PriorityClassMissing", fmt.Sprintf(
			"PriorityClass %q (--priority-class) does not exist: node pods run without a priority class until it is created", cfg.PriorityClassName))
		cfg.PriorityClassName = ""
		return cfg, nil
	}
	return cfg, err
}

// deleteIfPresent deletes obj if the cache has it: a blind DELETE of an
// object that is not there would still be a write request per reconcile.
func (r *Reconciler) deleteIfPresent(ctx context.Context, log logr.Logger, obj client.Object) error {
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
	}
	log.Info("deleted", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
	return nil
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

// The node objects of a pools CR that a pathConfig CR had: switching
// removes the legacy DaemonSet and its SCC (an SCC grants privileges: none
// is left that nothing uses); its ServiceAccount and RBAC stay until the
// CR is deleted (harmless, and a switch back needs them again).
func (r *Reconciler) legacyObjects() []client.Object {
	objs := []client.Object{&appsv1.DaemonSet{ObjectMeta: objMeta(render.LegacyDaemonSetName, r.Config.Namespace)}}
	if r.Config.OpenShift {
		objs = append(objs, &secv1.SecurityContextConstraints{ObjectMeta: objMeta(render.LegacySCCName, "")})
	}
	return objs
}

// eventf records an event on the CR.
func (r *Reconciler) eventf(cr *hppv1.HostPathProvisioner, typ, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(cr, nil, typ, reason, "Reconcile", note, args...)
	}
}

func objMeta(name, ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
