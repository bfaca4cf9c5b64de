package hostpathprovisioner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// csiPodNodes is, per node, the CSI DaemonSet's pod there, read from the
// cache. A directory pool is served on a node when hpp-csi runs ready
// there. That is all the operator can see: a pool hpp-csi finds unusable
// (directory gone, another filesystem mounted over it) does not fail the
// pod, which still serves the other pools; hpp-csi then refuses creates
// in it with the reason, and reports no capacity for it.
func (r *Reconciler) csiPodNodes(ctx context.Context) (map[string]*corev1.Pod, error) {
	pods, err := r.nodePods(ctx, render.CSIDaemonSetName)
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		// During a rolling update a node may briefly have two pods: the
		// ready one tells the truth about the pool.
		if cur, ok := out[p.Spec.NodeName]; ok && podReady(cur) {
			continue
		}
		out[p.Spec.NodeName] = p
	}
	return out, nil
}

// dirPoolNodes is a directory pool's status per node, sorted by node.
func dirPoolNodes(pods map[string]*corev1.Pod) []hppv1.PoolNodeStatus {
	nodes := make([]hppv1.PoolNodeStatus, 0, len(pods))
	for node, p := range pods {
		ns := hppv1.PoolNodeStatus{Name: node, Phase: hppv1.StoragePoolPreparing}
		if podReady(p) {
			ns.Phase, ns.Ready = hppv1.StoragePoolReady, true
		} else {
			ns.Reason = fmt.Sprintf("hpp-csi pod %s is not ready on this node (%s)", p.Name, nonEmpty(string(p.Status.Phase), "not started"))
		}
		nodes = append(nodes, ns)
	}
	slices.SortFunc(nodes, func(a, b hppv1.PoolNodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return nodes
}

// nodePods are the pods of a node DaemonSet, found by their controller
// rather than by label: a DaemonSet taken over keeps upstream's selector,
// and upstream gave both of its DaemonSets' pods the same k8s-app value.
func (r *Reconciler) nodePods(ctx context.Context, daemonSet string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.Config.Namespace)); err != nil {
		return nil, fmt.Errorf("list node pods: %w", err)
	}
	out := pods.Items[:0]
	for _, p := range pods.Items {
		if ofDaemonSet(&p, daemonSet) {
			out = append(out, p)
		}
	}
	return out, nil
}

func ofDaemonSet(o metav1.Object, name string) bool {
	c := metav1.GetControllerOf(o)
	return c != nil && c.Kind == "DaemonSet" && c.Name == name
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// withHeld adds the reasons of held nodes (heldnodes.go) to their entries,
// or the entries themselves while no pod runs there yet.
func withHeld(nodes, held []hppv1.PoolNodeStatus) []hppv1.PoolNodeStatus {
	for _, h := range held {
		i := slices.IndexFunc(nodes, func(n hppv1.PoolNodeStatus) bool { return n.Name == h.Name })
		if i < 0 {
			nodes = append(nodes, h)
			continue
		}
		nodes[i].Reason = h.Reason
	}
	return nodes
}
