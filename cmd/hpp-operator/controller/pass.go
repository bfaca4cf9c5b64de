package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// pass is one reconcile of a CR, in a fixed order: observe the cluster,
// render the desired objects from the CR and what was observed, apply
// them, derive the status. Each step fills its part of this one value;
// nothing is read back from the CR's status to decide.
type pass struct {
	cr  *hppv1.HostPathProvisioner
	log logr.Logger

	// Observed.
	// cfg is the operator's configuration with what the cluster says:
	// the held nodes, the plugin directory kubelet knows, a missing
	// PriorityClass dropped.
	cfg       render.Config
	placement nodeSet
	held      heldNodes
	// poolNodes: per pvcTemplate pool, the nodes it is mounted on, sorted.
	poolNodes map[string][]string
	// pools are the CR's pools the CSI driver serves (nil: pathConfig).
	pools []hppv1.StoragePool

	// Rendered.
	want []client.Object // applied in order, owned by the CR
	gone []client.Object // the other mode's objects, deleted
	// mounters: per pvcTemplate pool and node, the mounter Deployment and
	// (not shared) the claim.
	mounters []mounterWant

	// Derived.
	st *status
}

// mounterWant is one pool on one node.
type mounterWant struct {
	deployment *appsv1.Deployment
	claim      *corev1.PersistentVolumeClaim // nil for a shared pool's node
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

// livePluginDir is the socket directory of the CSI DaemonSet that runs
// now, "" when there is none. Kubelet dials the socket path the driver
// registered; moving it under running pods made kubelet dial a socket
// that was gone (issue 21), so a live DaemonSet keeps its directory,
// upstream's plugins/csi-hostpath included. Fresh installs get hpp's.
func (r *Reconciler) livePluginDir(ctx context.Context) (string, error) {
	ds := &appsv1.DaemonSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: render.CSIDaemonSetName}, ds)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read DaemonSet %s: %w", render.CSIDaemonSetName, err)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "socket-dir" && v.HostPath != nil {
			return v.HostPath.Path, nil
		}
	}
	return "", nil
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

// wantedMounters are the names of the mounter Deployments render built.
func (p *pass) wantedMounters() map[string]bool {
	out := map[string]bool{}
	for _, m := range p.mounters {
		out[m.deployment.Name] = true
	}
	return out
}

// holds reports whether a node outside the placement holds volumes of
// the pool (observed, heldnodes.go).
func (p *pass) holds(node, pool string) bool { return p.held[node][pool] > 0 }

// inSpec reports whether the CR has the pvcTemplate pool.
func (p *pass) inSpec(pool string) bool {
	return slices.ContainsFunc(p.pools, func(sp hppv1.StoragePool) bool { return sp.Name == pool && render.IsTemplatePool(&sp) })
}
