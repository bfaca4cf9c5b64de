package takeover

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

func pod(name, ownerKind, owner string, terminating bool, grace int64) *unstructured.Unstructured {
	p := obj("v1", "Pod", ns, name, "", nil, map[string]any{"spec": map[string]any{"nodeName": "node-a"}})
	p.SetUID(types.UID(name + "-uid"))
	p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: ownerKind, Name: owner, UID: "owner"}})
	if terminating {
		now := metav1.NewTime(time.Now())
		p.SetDeletionTimestamp(&now)
		p.SetDeletionGracePeriodSeconds(&grace)
	}
	return p
}

// TestRollDoesNotWaitForTheOldDriverPod: while the switch waits for the
// roll, a CSI node pod being deleted with upstream's 30 s grace is deleted
// again with grace 0 (only that pod: a UID precondition); a running CSI
// pod, one already deleted with grace 0 and another workload's stopping
// pod are left alone.
func TestRollDoesNotWaitForTheOldDriverPod(t *testing.T) {
	c := newSimCluster(t)
	for _, p := range []*unstructured.Unstructured{
		pod("csi-old", "DaemonSet", CSIDaemonSetName, true, 30),
		pod("csi-new", "DaemonSet", CSIDaemonSetName, false, 0),
		pod("csi-quick", "DaemonSet", CSIDaemonSetName, true, 0),
		pod("mounter-old", "ReplicaSet", "hpp-pool-653b815e-7d9f", true, 30),
	} {
		if err := c.tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	var deletes []clienttesting.DeleteActionImpl
	c.client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		deletes = append(deletes, a.(clienttesting.DeleteActionImpl))
		return false, nil, nil
	})
	c.client.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		_, o, err := clienttesting.ObjectReaction(c.tracker())(a)
		return true, o, err
	})
	var out bytes.Buffer
	r := simRunner(c, &out)
	if err := r.hurryOldDriverPods(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(deletes) != 1 || deletes[0].GetName() != "csi-old" {
		t.Fatalf("deletes %+v, want one, of csi-old", deletes)
	}
	opts := deletes[0].GetDeleteOptions()
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
		t.Errorf("grace %v, want 0", opts.GracePeriodSeconds)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "csi-old-uid" {
		t.Errorf("preconditions %+v, want the pod's UID", opts.Preconditions)
	}
	if !strings.Contains(out.String(), "pod csi-old (node node-a) stopping: removed without waiting for its 30 s grace") {
		t.Errorf("output %q does not say which pod was hurried", out.String())
	}
	if r.changes != 1 {
		t.Errorf("%d changes counted, want 1", r.changes)
	}
}
