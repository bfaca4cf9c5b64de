package takeover

import (
	"context"
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHandOverSkipsWhatAnEarlierStepRemoved: the switch reads its
// inventory once, then deletes upstream's operator Deployment (step 2)
// before handing kubectl create's fields over (step 4); the object the
// inventory still lists is gone, and that is not an error (it stopped
// the switch on the real node).
func TestHandOverSkipsWhatAnEarlierStepRemoved(t *testing.T) {
	live := obj("apps/v1", "Deployment", ns, OperatorName, "", nil, nil)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`),
	}})
	r := &Runner{Client: fakeClient(), Namespace: ns, Out: io.Discard}
	if err := r.handOver(context.Background(), live); err != nil {
		t.Errorf("hand over a Deployment that is gone: %v, want nothing to do", err)
	}
	r = &Runner{Client: fakeClient(live.DeepCopy()), Namespace: ns, Out: io.Discard}
	if err := r.handOver(context.Background(), live); err != nil {
		t.Fatalf("hand over a live Deployment: %v", err)
	}
	got, err := r.get(rDeployment, OperatorName)
	if err != nil || got == nil {
		t.Fatalf("get: %v %v", got, err)
	}
	for _, mf := range got.GetManagedFields() {
		if mf.Manager == "kubectl-create" {
			t.Errorf("kubectl-create still owns fields after the hand-over: %+v", got.GetManagedFields())
		}
	}
}
