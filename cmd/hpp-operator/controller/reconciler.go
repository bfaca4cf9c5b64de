// Package controller is the HostPathProvisioner reconciler: from the one CR
// it applies the objects package render builds, reports status, and cleans
// up on deletion.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	secv1 "github.com/openshift/api/security/v1"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Finalizer holds the CR until the operator has removed what it made. It
// is upstream's own finalizer name: either operator then releases a CR the
// other ran, so neither can leave a CR that nothing ever lets go (issue
// 21: the way back to upstream's operator).
const Finalizer = "finalizer.delete.hostpath-provisioner"

// oldFinalizer is the finalizer earlier hpp versions set; a CR that has it
// gets Finalizer instead.
const oldFinalizer = "hostpathprovisioner.kubevirt.io/cleanup"

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
	// ready is the readiness gauge (metrics.go), set up with the manager.
	ready prometheus.Gauge
	// swept: the CRs (by uid) whose cluster-scoped leftovers of upstream's
	// operator were looked for (leftovers.go).
	swept *sync.Map
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
	if !controllerutil.ContainsFinalizer(cr, Finalizer) || controllerutil.ContainsFinalizer(cr, oldFinalizer) {
		patch := client.MergeFrom(cr.DeepCopy())
		controllerutil.AddFinalizer(cr, Finalizer)
		controllerutil.RemoveFinalizer(cr, oldFinalizer)
		if err := r.Client.Patch(ctx, cr, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	p := &pass{cr: cr, log: log, st: newStatus(cr, r.Config.Version)}
	runErr := r.run(ctx, p)
	if err := r.writeStatus(ctx, cr, p.st); err != nil {
		return ctrl.Result{}, errors.Join(runErr, err)
	}
	if runErr != nil {
		return ctrl.Result{}, runErr
	}
	if p.st.progressing() {
		// DaemonSet status changes also trigger a reconcile; this only
		// bounds how stale the status can get if an event is missed.
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	return ctrl.Result{}, nil
}

// run is one pass: observe, render, apply, derive (pass.go).
func (r *Reconciler) run(ctx context.Context, p *pass) error {
	blocking, strict := hppv1.ValidateStored(&p.cr.Spec)
	if len(blocking) > 0 {
		// The CRD's rules and the webhook normally stop this; a CR written
		// while neither was in place lands here and is not acted on; the
		// status still says how the workloads are.
		p.st.degrade("InvalidSpec", blocking.ToAggregate().Error())
		r.derive(ctx, p)
		return nil
	}
	// A CR upstream's operator accepted keeps running; what hpp would
	// refuse on a change is reported, not enforced.
	p.st.warnSpec(strict)
	if err := r.observe(ctx, p); err != nil {
		return err
	}
	if err := r.render(p); err != nil {
		return err
	}
	if err := r.apply(ctx, p); err != nil {
		return err
	}
	r.derive(ctx, p)
	return nil
}

// applyOwned applies obj with the CR as its owner (the CSIDriver excepted:
// it must outlive the CR while PVs of the driver exist, see finalize). A
// DaemonSet or Deployment of another installation keeps its selector
// (applier.go): it is never deleted and recreated, so its pods roll.
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
