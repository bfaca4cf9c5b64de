package hostpathprovisioner

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

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

// run is one pass (its state: pass.go): observe, render, apply, derive,
// each below.
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
