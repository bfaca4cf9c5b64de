// Package nodeloss is the node-loss controller: it reports the hpp volumes
// of nodes that went away and, for the opted-in ones, releases their
// claims and removes their orphaned PVs. It stands alone: it shares no code
// with the HostPathProvisioner reconciler, only the CR whose status it
// writes (status.strandedVolumes).
package nodeloss

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EventRecorder is the part of client-go's events.EventRecorder used here.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reports the volumes of nodes that went away and, for the
// opted-in ones, releases their claims and removes their orphaned PVs
// (decision.go has the rules). It looks at the whole cluster at
// once: one request name, triggered by Node and PV changes and by its own
// timers.
type Reconciler struct {
	// Client reads Nodes, PVs, StorageClasses and CRs from the manager's
	// cache (all cached in full) and writes to the API server.
	Client client.Client
	// APIReader reads what the cache does not hold (claims and pods in
	// users' namespaces), only for volumes of lost nodes.
	APIReader client.Reader
	Recorder  EventRecorder
	Log       logr.Logger
	// ReleaseDelay is the delay of a "true" opt-in.
	ReleaseDelay time.Duration
	// NotReadyGrace: a node NotReady this long has its volumes reported.
	NotReadyGrace time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// stranded is the kubevirt_hpp_stranded_volumes gauge, registered by
	// SetupWithManager.
	stranded *prometheus.GaugeVec

	mu sync.Mutex
	// lost remembers, per node, when it was first seen gone and which of
	// its volumes were reported; seeded from the CR status after a
	// restart, so the delay does not start over.
	lost   map[string]*lostNode
	seeded bool
}

// nodeLossRequest is the one request name.
const nodeLossRequest = "node-loss"

// SetupWithManager registers the controller and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
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
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
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

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(regarding client.Object, typ, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, nil, typ, reason, action, "%s", note)
	}
}
