package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// nodeLossRequest is the one request name.
const nodeLossRequest = "node-loss"

// SetupWithManager registers the controller and its watches.
func (r *NodeLossReconciler) SetupWithManager(mgr ctrl.Manager) error {
	stranded, err := registerStrandedGauge()
	if err != nil {
		return err
	}
	r.stranded = stranded
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: nodeLossRequest}}}
	})
	isHPPPV := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pv, ok := o.(*corev1.PersistentVolume)
		return ok && volumeNode(pv) != ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("node-loss").
		Watches(&corev1.Node{}, one, builder.WithPredicates(nodeReadinessChanged)).
		Watches(&corev1.PersistentVolume{}, one, builder.WithPredicates(isHPPPV)).
		Complete(r)
}

// nodeReadinessChanged passes a node's creation, deletion and a change of
// its Ready condition; heartbeats and cordoning are ignored.
var nodeReadinessChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || nodeReady(o) != nodeReady(n) || o.DeletionTimestamp != n.DeletionTimestamp
	},
}

// Reconcile looks at every hpp volume's node, acts on the decisions and
// writes the report.
func (r *NodeLossReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if err := r.seed(ctx); err != nil {
		return ctrl.Result{}, err
	}
	w, err := r.observe(ctx, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	var recheck time.Duration
	var errs []error
	for _, v := range w.volumes {
		if err := r.act(ctx, v, now); err != nil {
			errs = append(errs, err)
		}
		if d := v.decision.recheck; d > 0 && (recheck == 0 || d < recheck) {
			recheck = d
		}
	}
	r.forgetReturned(ctx, w)
	r.setStrandedMetric(w)
	if err := r.writeReport(ctx, w); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, fmt.Errorf("node loss: %w", errors.Join(errs...))
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}
