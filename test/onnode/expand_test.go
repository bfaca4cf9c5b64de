package onnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// expandInUse grows a claim of class from 10Mi to 20Mi with `kubectl
// patch` while a pod uses it, through the install's own csi-resizer
// Deployment (hpp-csi --controller-only) and the node plugin's
// NodeExpandVolume: the claim reports 20Mi without a pod restart. It is
// also what makes csi-resizer use every permission it is granted (PV
// patch, claim status patch, events), which testEveryGrantUsed checks.
func (e *env) expandInUse(ctx context.Context, t *testing.T, class string) {
	t.Helper()
	ns := e.testNamespace(ctx, t)
	client := e.c.Client
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, "grow", class, "10Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := kit.Pod(ns, "user", "sleep 3600", kit.PodVolume{Name: "data", Claim: "grow", Path: "/data"})
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running, err := kit.WaitPodPhase(ctx, client, ns, "user", corev1.PodRunning, 3*time.Minute)
	if err != nil {
		t.Fatalf("%v\ninstall: %s", err, e.podStates(ctx))
	}
	patch := `{"spec":{"resources":{"requests":{"storage":"20Mi"}}}}`
	if _, err := e.kubectl(ctx, "", "-n", ns, "patch", "pvc", "grow", "--type=merge", "-p", patch); err != nil {
		t.Fatal(err)
	}
	patched := time.Now()
	want := resource.MustParse("20Mi")
	err = kit.Poll(ctx, 2*time.Minute, "claim grow reports 20Mi", func(ctx context.Context) (bool, string, error) {
		pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grow", metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		got := pvc.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(want) == 0, fmt.Sprintf("status capacity %s, conditions %v", got.String(), pvc.Status.Conditions), nil
	})
	if err != nil {
		t.Fatalf("%v\ninstall: %s", err, e.podStates(ctx))
	}
	now, err := client.CoreV1().Pods(ns).Get(ctx, "user", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != running.UID || restarts(now) != restarts(running) {
		t.Fatalf("pod user was replaced or restarted during the expansion (uid %s -> %s, restarts %d -> %d)", running.UID, now.UID, restarts(running), restarts(now))
	}
	t.Logf("claim grew 10Mi -> 20Mi in %s while pod %s ran", time.Since(patched).Round(100*time.Millisecond), types.NamespacedName{Namespace: ns, Name: "user"})
	if err := client.CoreV1().Pods(ns).Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "grow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}
