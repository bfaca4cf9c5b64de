package onnode

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/test/e2e"
)

// stopOperator deletes the operator's Deployment and waits until its pod
// is gone, before the overlay's removal. `kubectl delete` removes objects
// in manifest order, RBAC before the Deployment: the operator, still
// running, renews its leader Lease every 2 s, and a renewal that falls
// between its Role's deletion and its pod's end is refused (403), which
// the audit check rightly counts against RBAC. Stopping the operator
// first is also the order to uninstall it in.
func (e *env) stopOperator(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := e.kubectl(ctx, "", "delete", "deployment", operatorName, "-n", namespace, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	err := e2e.Poll(ctx, 2*time.Minute, "operator pod gone", func(ctx context.Context) (bool, string, error) {
		pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + operatorName})
		if err != nil {
			return false, "", e2e.Retry(err)
		}
		return len(pods.Items) == 0, e.podStates(ctx), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator stopped")
}
