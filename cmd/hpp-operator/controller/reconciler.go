package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
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

// observe reads what the rendering depends on: where the driver runs,
// the nodes that hold volumes outside it, where each pool is mounted, and
// the live CSI DaemonSet's plugin directory.
func (r *Reconciler) observe(ctx context.Context, p *pass) error {
	cfg, err := r.checkPriorityClass(ctx, p.st)
	if err != nil {
		return err
	}
	if p.placement, err = csiNodes(ctx, r.Client, &p.cr.Spec.Workload); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	if p.held, err = findHeldNodes(ctx, r.Client, p.placement); err != nil {
		return fmt.Errorf("find nodes holding volumes: %w", err)
	}
	cfg.HeldNodes = p.held.nodes()
	if cfg.PluginDir, err = r.livePluginDir(ctx); err != nil {
		return err
	}
	p.cfg = cfg
	if !p.cr.Spec.IsLegacy() {
		p.pools = p.cr.Spec.StoragePools
	}
	p.poolNodes = map[string][]string{}
	for i := range p.pools {
		pool := &p.pools[i]
		if !render.IsTemplatePool(pool) {
			continue
		}
		if p.poolNodes[pool.Name], err = r.poolNodes(ctx, pool.Name, p.placement); err != nil {
			return err
		}
	}
	return nil
}

// render builds every object of the CR from it and what was observed.
func (r *Reconciler) render(p *pass) error {
	spec := &p.cr.Spec
	// A pathConfig CR runs the legacy provisioner and, as upstream's
	// operator does, the CSI driver beside it: its pool "legacy" is
	// <path>/csi, and the PVs hpp-migrate moves from the legacy provisioner
	// are served in place from <path> (render/pathconfig.go). A pools CR
	// runs the CSI driver only.
	csi, err := p.cfg.CSIObjects(spec)
	if err != nil {
		return err
	}
	// SCCs first: OpenShift admits a node pod only if its SCC exists.
	p.want = p.cfg.SCCs(spec)
	if spec.IsLegacy() {
		p.want = append(p.want, p.cfg.LegacyObjects(spec)...)
	} else {
		p.gone = r.legacyObjects()
	}
	p.want = append(p.want, csi...)
	p.want = append(p.want, p.cfg.MonitoringObjects()...)
	for i := range p.pools {
		pool := &p.pools[i]
		if !render.IsTemplatePool(pool) {
			continue
		}
		for _, node := range p.poolNodes[pool.Name] {
			m := mounterWant{deployment: p.cfg.MounterDeployment(spec, pool, node)}
			if !render.IsSharedPool(pool) {
				m.claim = p.cfg.PoolClaim(pool, node)
			}
			p.mounters = append(p.mounters, m)
		}
	}
	return nil
}

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
			r.eventf(p.cr, typ, "ImmutableFieldsKept",
				"%s %s keeps %s of the live object (immutable; kept rather than replaced, so nothing restarts at once)",
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

// derive sets the status from the workloads as they are now.
func (r *Reconciler) derive(ctx context.Context, p *pass) {
	p.st.nodes = p.poolNodes
	p.held.report(p.st)
	r.observeWorkloads(ctx, p.cr, p.st)
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
