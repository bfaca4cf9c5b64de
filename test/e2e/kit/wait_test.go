package kit

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The chaos tiers' invariant "every claim Bound within 2 minutes of the
// last fault" is WaitPVCBound with that deadline: fed a claim that stays
// Pending, it fails naming the claim and its phase; a Bound claim passes.
func TestWaitPVCBoundFailsOnAPendingClaim(t *testing.T) {
	claim := func(name string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: name},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	c := fake.NewClientset(claim("pending", corev1.ClaimPending), claim("bound", corev1.ClaimBound))
	ctx := context.Background()
	_, err := WaitPVCBound(ctx, c, "chaos", "pending", 600*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "claim chaos/pending Bound: not reached in 600ms (last state: phase Pending") {
		t.Fatalf("a Pending claim: %v", err)
	}
	if pvc, err := WaitPVCBound(ctx, c, "chaos", "bound", time.Second); err != nil || pvc.Name != "bound" {
		t.Fatalf("a Bound claim: %v, %v", pvc, err)
	}
}
