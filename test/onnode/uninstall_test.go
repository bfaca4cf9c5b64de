package onnode

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// stopWorkloads deletes the install's DaemonSets and Deployments and
// waits until their pods are gone, before the rest of an overlay goes.
// `kubectl delete` removes objects in manifest order, RBAC before the
// workloads, and the namespace controller deletes Roles while pods still
// run: a request a component makes meanwhile (the operator renews its
// leader Lease every 2 s and reports its stop with an Event;
// csi-provisioner updates capacity) is refused (403), which the audit
// check rightly counts against RBAC. Workloads first is also the order to
// uninstall in (deploy/README.md).
func (e *env) stopWorkloads(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := e.kubectl(ctx, "", "delete", "daemonsets,deployments", "--all", "-n", namespace, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	e.waitPodsGone(ctx, t, "the install's pods", "")
	t.Logf("workloads of %s stopped", namespace)
}

// waitPodsGone waits until no pod of the install namespace matches the
// label selector ("": any pod).
func (e *env) waitPodsGone(ctx context.Context, t *testing.T, what, selector string) {
	t.Helper()
	err := kit.Poll(ctx, 2*time.Minute, what+" gone", func(ctx context.Context) (bool, string, error) {
		pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		return len(pods.Items) == 0, e.podStates(ctx), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
