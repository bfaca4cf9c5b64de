package hostpathprovisioner

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// observe reads what the rendering depends on: where the driver runs,
// where each pool is mounted, the nodes that hold volumes outside the
// placement, and the live CSI DaemonSet's plugin directory.
func (r *Reconciler) observe(ctx context.Context, p *pass) error {
	cfg, err := r.passConfig(ctx, &p.cr.Spec, p.st)
	if err != nil {
		return err
	}
	if p.placement, err = csiNodes(ctx, r.Client, &p.cr.Spec.Workload); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
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
	if p.held, err = findHeldNodes(ctx, r.Client, p.placement); err != nil {
		return fmt.Errorf("find nodes holding volumes: %w", err)
	}
	cfg.HeldNodes = p.held.nodes()
	if cfg.PluginDir, err = r.livePluginDir(ctx); err != nil {
		return err
	}
	p.cfg = cfg
	return nil
}

// passConfig returns the configuration to render the CR with: what the CR
// decides (render.Config.ForCR) and, without the configured PriorityClass,
// none: pods would never schedule, so they run without one and Degraded
// says why.
func (r *Reconciler) passConfig(ctx context.Context, spec *hppv1.HostPathProvisionerSpec, st *status) (render.Config, error) {
	cfg := r.Config.ForCR(spec)
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
