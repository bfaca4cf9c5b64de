package hostpathprovisioner

import (
	"context"
	"sync"

	secv1 "github.com/openshift/api/security/v1"
	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// releaseRequest is the request name (never a valid CR name) of a
// reconcile that only checks whether a CSIDriver left behind by a deleted
// CR can go.
const releaseRequest = "-release-csidriver"

// CacheOptions keeps the operator's cache small: namespaced objects only
// from its namespace, cluster-scoped ones it makes only with its label. PVs
// are cached in full: the finalizer and the webhook count them. Nodes and
// StorageClasses too: pools follow the nodes, and an overlay StorageClass
// of the same name made by someone else must be seen to be reported.
func CacheOptions(cfg render.Config) cache.Options {
	mine := labels.SelectorFromSet(labels.Set{render.ManagedByLabel: cfg.ManagedBy})
	ns := map[string]cache.Config{cfg.Namespace: {}}
	namespaced := []client.Object{&appsv1.DaemonSet{}, &appsv1.Deployment{}, &batchv1.Job{},
		&corev1.PersistentVolumeClaim{}, &corev1.ServiceAccount{}, &corev1.Service{}, &rbacv1.Role{}, &rbacv1.RoleBinding{},
		// The finalizer waits for the node DaemonSets' pods; a mounter
		// pod's state explains a pool's status.
		&corev1.Pod{}}
	labeled := []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}, &storagev1.CSIDriver{}}
	if cfg.PrometheusOperator {
		namespaced = append(namespaced, &promv1.ServiceMonitor{}, &promv1.PrometheusRule{})
	}
	if cfg.OpenShift {
		labeled = append(labeled, &secv1.SecurityContextConstraints{})
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range namespaced {
		byObject[obj] = cache.ByObject{Namespaces: ns}
	}
	for _, obj := range labeled {
		byObject[obj] = cache.ByObject{Label: mine}
	}
	return cache.Options{ByObject: byObject}
}

// SetupWithManager registers the reconciler and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ready, err := registerReadyGauge()
	if err != nil {
		return err
	}
	r.ready = ready
	r.swept = &sync.Map{}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("hpp-operator")
	}
	allCRs := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &hppv1.HostPathProvisionerList{}
		if err := mgr.GetClient().List(ctx, list); err != nil {
			r.Log.Error(err, "list HostPathProvisioners")
			return nil
		}
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: releaseRequest}}}
		for _, cr := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: cr.Name}})
		}
		return reqs
	})
	// A driver PV that comes or goes can change where hpp-csi and the
	// mounters must stay (heldnodes.go) and whether the CSIDriver can go.
	isDriverPV := func(o client.Object) bool {
		pv, ok := o.(*corev1.PersistentVolume)
		return ok && pv.Spec.CSI != nil && pv.Spec.CSI.Driver == contract.DriverName
	}
	driverPVAddedOrDeleted := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isDriverPV(e.Object) },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isDriverPV(e.Object) },
	}
	poolClaim := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[contract.PoolLabel]
		return ok
	})
	mounterPod := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[render.MounterSelector]
		return ok
	})
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Config.PriorityClassName != "" {
		// A missing PriorityClass degrades the CR; its creation heals it.
		b = b.Watches(&schedulingv1.PriorityClass{}, allCRs)
	}
	if r.Config.PrometheusOperator {
		// Only then are they in the cache (see CacheOptions).
		b = b.Owns(&promv1.ServiceMonitor{}).Owns(&promv1.PrometheusRule{})
	}
	if r.Config.OpenShift {
		b = b.Owns(&secv1.SecurityContextConstraints{})
	}
	return b.
		Named("hostpathprovisioner").
		For(&hppv1.HostPathProvisioner{}).
		Owns(&appsv1.DaemonSet{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&corev1.Service{}).
		Owns(&rbacv1.ClusterRole{}).
		Owns(&rbacv1.ClusterRoleBinding{}).
		Owns(&appsv1.Deployment{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.PersistentVolumeClaim{}, allCRs, builder.WithPredicates(poolClaim)).
		Watches(&corev1.Node{}, allCRs, builder.WithPredicates(nodePlacementChanged)).
		// A mounter pod's state is the reason a pool's status gives.
		// Mounter pods for their status; a node pod's deletion wakes the
		// finalizer that waits for it (finalize.go), rather than its
		// retry backoff.
		Watches(&corev1.Pod{}, allCRs, builder.WithPredicates(predicate.Or(mounterPod, nodePodDeleted))).
		Watches(&storagev1.CSIDriver{}, allCRs).
		Watches(&corev1.PersistentVolume{}, allCRs, builder.WithPredicates(driverPVAddedOrDeleted)).
		Complete(r)
}

// nodePlacementChanged passes the Node events that can change where the
// CSI driver, and so every pool, runs: a node added or removed, or its
// labels or taints changed. Status heartbeats are ignored.
var nodePlacementChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) || o.DeletionTimestamp != n.DeletionTimestamp
	},
}

// nodePodDeleted passes the deletion of a node DaemonSet's pod (by its
// controller); pods are cached for the finalizer anyway.
var nodePodDeleted = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc: func(e event.DeleteEvent) bool {
		return ofDaemonSet(e.Object, render.CSIDaemonSetName) || ofDaemonSet(e.Object, render.LegacyDaemonSetName)
	},
}
