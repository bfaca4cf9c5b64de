package hostpathprovisioner

import (
	"slices"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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
	// overlays: per shared pool, its overlay StorageClass (created only
	// when missing); claims: per shared pool, its one claim.
	overlays []overlayWant
	claims   []*corev1.PersistentVolumeClaim

	// Derived.
	st *status
}

// mounterWant is one pool on one node.
type mounterWant struct {
	deployment *appsv1.Deployment
	claim      *corev1.PersistentVolumeClaim // nil for a shared pool's node
}

// overlayWant is a shared pool's overlay StorageClass.
type overlayWant struct {
	pool  string
	class *storagev1.StorageClass
}

// holds reports whether a node outside the placement holds volumes of
// the pool (observed, heldnodes.go).
func (p *pass) holds(node, pool string) bool { return p.held[node][pool] > 0 }

// inSpec reports whether the CR has the pvcTemplate pool.
func (p *pass) inSpec(pool string) bool {
	return slices.ContainsFunc(p.pools, func(sp hppv1.StoragePool) bool { return sp.Name == pool && render.IsTemplatePool(&sp) })
}
