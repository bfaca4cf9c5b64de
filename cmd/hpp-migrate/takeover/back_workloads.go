package takeover

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Upstream's operator finds the nodes of its pvcTemplate pools from the
// CSI DaemonSet's pods that are not being deleted, and deletes the pool
// mounter Deployments of every other node, with a cleanup Job each that
// unmounts the pool. A reconcile while it rolls the DaemonSet, between the
// old pod's deletion and the new pod's creation, sees no pod on the node:
// on the way back, where upstream's operator rolls hpp's pods to its own,
// the real node showed every mounter deleted and the pools unmounted by
// cleanup Jobs (make takeover-on-node). So the way back puts upstream's
// node workloads back itself and waits for their pods before upstream's
// operator starts; it then finds every pod in place and nothing to roll.

// restoreWorkloads puts each backed-up workload back as upstream's
// operator wrote it and waits until its pods have rolled.
func (r *Runner) restoreWorkloads(ctx context.Context, workloads []*unstructured.Unstructured) error {
	for _, w := range workloads {
		if err := r.restoreWorkload(ctx, w); err != nil {
			return err
		}
	}
	return r.pollRoll(ctx, "upstream's node pods rolled back", func() (bool, string, error) {
		var pending []string
		for _, w := range workloads {
			res, err := resourceByKind(w.GetKind())
			if err != nil {
				return false, "", err
			}
			live, err := r.get(res, w.GetName())
			if err != nil {
				return false, "", err
			}
			if live != nil && !rolled(live) {
				pending = append(pending, rolloutState(live))
			}
		}
		return len(pending) == 0, strings.Join(pending, "; "), nil
	})
}

// restoreWorkload writes the backed-up spec, labels and annotations over
// the live workload (its selector is immutable and the switch kept it)
// with a plain Update under upstream's operator's field manager, as that
// operator writes: the fields it changes are its own again, so a later
// switch hands them to hpp's manager (adopt) and hpp's apply removes what
// hpp does not set, such as upstream's sidecars. With managedFields reset
// instead, one run on the real node kept upstream's sidecars in hpp's pod
// after the next switch (most likely fields without an owner for adopt to
// hand over). A workload gone since the switch is left for upstream's
// operator to make.
func (r *Runner) restoreWorkload(ctx context.Context, w *unstructured.Unstructured) error {
	res, err := resourceByKind(w.GetKind())
	if err != nil {
		return err
	}
	live, err := r.get(res, w.GetName())
	if err != nil || live == nil {
		return err
	}
	spec, _, _ := unstructured.NestedMap(w.Object, "spec")
	if selector, found, _ := unstructured.NestedFieldCopy(live.Object, "spec", "selector"); found {
		spec["selector"] = selector
	}
	liveSpec, _, _ := unstructured.NestedMap(live.Object, "spec")
	if equality.Semantic.DeepEqual(spec, liveSpec) && equality.Semantic.DeepEqual(w.GetLabels(), live.GetLabels()) {
		return nil // a second run: already put back
	}
	want := live.DeepCopy()
	want.Object["spec"] = spec
	want.SetLabels(w.GetLabels())
	want.SetAnnotations(w.GetAnnotations())
	if _, err := r.res(res).Update(ctx, want, metav1.UpdateOptions{FieldManager: UpstreamOperatorManager}); err != nil {
		return fmt.Errorf("put back %s: %w", refOf(w), err)
	}
	r.did("put back %s", refOf(w))
	return nil
}

// rolled: every pod of the workload runs its current template and no old
// pod is left, not even a terminating one.
func rolled(o *unstructured.Unstructured) bool {
	st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(o.Object, "status", f); return v }
	if st("observedGeneration") < o.GetGeneration() {
		return false
	}
	if o.GetKind() == "DaemonSet" {
		desired := st("desiredNumberScheduled")
		return st("updatedNumberScheduled") == desired && st("numberAvailable") == desired && st("currentNumberScheduled") == desired
	}
	want, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	return st("replicas") == want && st("updatedReplicas") == want && st("availableReplicas") == want
}

func rolloutState(o *unstructured.Unstructured) string {
	st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(o.Object, "status", f); return v }
	if o.GetKind() == "DaemonSet" {
		return fmt.Sprintf("%s: %d/%d nodes updated, %d available", refOf(o), st("updatedNumberScheduled"), st("desiredNumberScheduled"), st("numberAvailable"))
	}
	return fmt.Sprintf("%s: %d pods, %d updated, %d available", refOf(o), st("replicas"), st("updatedReplicas"), st("availableReplicas"))
}
