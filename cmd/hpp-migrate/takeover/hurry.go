package takeover

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// oldDriverGrace is the termination grace, in seconds, left to a CSI node
// pod that a roll is replacing.
//
// Upstream's CSI node pod has a container that ignores SIGTERM, so it
// takes its whole 30 s grace to stop; the DaemonSet controller starts the
// new pod on that node only once the old one is gone, and meanwhile the
// node has no CSI driver in CSINode: a new pod there that needs an hpp
// volume waits. Nothing needs that wait: CSI calls are idempotent and
// kubelet retries them, and the volumes already mounted stay mounted (they
// live in the host's mount table, not in the plugin's). So while the
// switch or the way back waits for the roll, it deletes each terminating
// CSI pod again with this grace, which kubelet honours for a pod already
// stopping. One second, not zero: zero would remove the pod object at once
// (a force delete) and let the new pod start while the old one still runs.
const oldDriverGrace int64 = 1

// hurryOldDriverPods shortens the termination of the CSI DaemonSet's pods
// that are being deleted to oldDriverGrace. The roll itself stays the
// DaemonSet controller's: one node at a time, as its update strategy says.
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
		r.did("pod %s (node %s) stopping: its grace shortened from %d s to %d s, so the new driver pod starts now", p.GetName(), node, *grace, oldDriverGrace)
	}
	return nil
}

func ownedByCSIDaemonSet(p *unstructured.Unstructured) bool {
	return slices.ContainsFunc(p.GetOwnerReferences(), func(o metav1.OwnerReference) bool {
		return o.Kind == "DaemonSet" && o.Name == CSIDaemonSetName
	})
}
