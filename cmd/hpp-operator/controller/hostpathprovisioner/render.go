package hostpathprovisioner

import (
	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

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
		if render.IsSharedPool(pool) {
			p.overlays = append(p.overlays, overlayWant{pool: pool.Name, class: p.cfg.OverlayStorageClass(pool)})
			p.claims = append(p.claims, p.cfg.PoolClaim(pool, ""))
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
