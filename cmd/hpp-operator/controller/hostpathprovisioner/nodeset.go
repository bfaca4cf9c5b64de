package hostpathprovisioner

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// daemonSetTolerations are the tolerations the DaemonSet controller adds to
// every DaemonSet pod (hostNetwork aside), so a node with only these taints
// still runs the CSI driver.
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// nodeSet is where the CSI driver, and so every pvcTemplate pool, runs.
type nodeSet struct {
	// run: the nodes a new DaemonSet pod would go to, by the DaemonSet
	// controller's own rule (workload nodeSelector and required node
	// affinity, no untolerated NoSchedule or NoExecute taint).
	run map[string]bool
	// stay: the nodes where a running pod stays: the same, but only
	// NoExecute taints count, as for the DaemonSet controller. A node
	// that turns NotReady (tainted NoSchedule by the node controller)
	// keeps its pool mounted.
	stay map[string]bool
}

// csiNodes computes the node set from the Node objects rather than from
// the DaemonSet's pods: a pod being replaced in a rolling update must not
// look like a node that left, or the update would unmount every pool.
func csiNodes(ctx context.Context, c client.Reader, w *hppv1.NodePlacement) (nodeSet, error) {
	set := nodeSet{run: map[string]bool{}, stay: map[string]bool{}}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return set, err
	}
	affinity := nodeaffinity.NewRequiredNodeAffinity(w.NodeSelector, w.Affinity)
	tolerations := append(slices.Clone(w.Tolerations), daemonSetTolerations...)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !n.DeletionTimestamp.IsZero() {
			continue
		}
		if ok, err := affinity.Match(n); err != nil || !ok {
			continue
		}
		if untolerated(n, tolerations, corev1.TaintEffectNoExecute) {
			continue
		}
		set.stay[n.Name] = true
		if !untolerated(n, tolerations, corev1.TaintEffectNoSchedule) {
			set.run[n.Name] = true
		}
	}
	return set, nil
}

func untolerated(n *corev1.Node, tolerations []corev1.Toleration, effect corev1.TaintEffect) bool {
	_, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, tolerations,
		func(t *corev1.Taint) bool { return t.Effect == effect }, false)
	return found
}

// poolNodes returns, sorted, the nodes a pool is mounted on: where the CSI
// driver would start, and where its mounter already runs and may stay.
func (r *Reconciler) poolNodes(ctx context.Context, pool string, set nodeSet) ([]string, error) {
	var out []string
	for node := range set.stay {
		if set.run[node] {
			out = append(out, node)
			continue
		}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: render.MounterName(pool, node)}, &appsv1.Deployment{})
		if err == nil {
			out = append(out, node)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}
