package takeover

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// oldDriverGrace is the termination grace, in seconds, the API server is
// told for a CSI node pod that a roll is replacing: zero, so the pod object
// goes at once.
//
// Upstream's CSI node pod has a container that ignores SIGTERM, so it
// takes its whole 30 s grace to stop; the DaemonSet controller starts the
// new pod on that node only once the old pod object is gone, and meanwhile
// the node has no CSI driver in CSINode (its registrar left at SIGTERM): a
// new pod there that needs an hpp volume waits. A shorter grace does not
// help: kubelet does not cut short a stop already under way (deleting the
// stopping pod again with 1 s still left the real node 31 s without a
// driver). With the object gone, the new pod starts while kubelet stops
// the old containers in their own time. The overlap is harmless: each pod
// has its own network namespace, the new driver takes over the socket
// paths, CSI calls are idempotent and kubelet retries them, and the
// volumes already mounted stay mounted (they live in the host's mount
// table, not in the plugin's).
const oldDriverGrace int64 = 0

// hurryOldDriverPods deletes again, with oldDriverGrace, the CSI
// DaemonSet's pods that are stopping. The roll itself stays the DaemonSet
// controller's: one node at a time, as its update strategy says.
func (r *Runner) hurryOldDriverPods(ctx context.Context) error {
	pods, err := r.res(rPod).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list the pods of %s: %w", r.Namespace, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		grace := p.GetDeletionGracePeriodSeconds()
		if p.GetDeletionTimestamp() == nil || grace == nil || *grace <= oldDriverGrace || !ownedByCSIDaemonSet(p) {
			continue
		}
		uid := p.GetUID()
		g := oldDriverGrace
		err := r.res(rPod).Delete(ctx, p.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &g, Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone, or another pod under that name by now
		}
		if err != nil {
			return fmt.Errorf("shorten the termination of pod %s: %w", p.GetName(), err)
		}
		node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		r.did("pod %s (node %s) stopping: removed without waiting for its %d s grace (kubelet still stops it), so the new driver pod starts now", p.GetName(), node, *grace)
	}
	return nil
}

// HurryOldDriverPods is hurryOldDriverPods for the command: a resumed run
// calls it first. It writes only when a CSI node pod is stopping.
func (r *Runner) HurryOldDriverPods(ctx context.Context) error { return r.hurryOldDriverPods(ctx) }

func ownedByCSIDaemonSet(p *unstructured.Unstructured) bool {
	return slices.ContainsFunc(p.GetOwnerReferences(), func(o metav1.OwnerReference) bool {
		return o.Kind == "DaemonSet" && o.Name == CSIDaemonSetName
	})
}
