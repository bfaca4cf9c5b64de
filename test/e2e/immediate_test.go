package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario 6: an Immediate StorageClass is not provisioned: a node's
// csi-provisioner takes the claim, hpp-csi (--check-binding-mode) looks up
// the class and refuses, so the claim gets a ProvisioningFailed event saying
// to use WaitForFirstConsumer, stays Pending, and no volume is created
// anywhere.
func TestImmediateBindingRefused(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	before := dirEntries(t, filepath.Join(env.Pools[kit.PoolLocal], "csi"))
	storageClass(t, env, kit.StorageClass(ns, kit.PoolLocal, kit.Immediate))
	createPVC(t, env, kit.PVC(ns, "now", ns, "16Mi"))
	var event string
	// csi-provisioner takes an Immediate claim after its node-deployment
	// base delay (about 20 s); hpp-csi then refuses it.
	err := kit.Poll(ctx, 2*time.Minute, "ProvisioningFailed event naming WaitForFirstConsumer on the claim", func(ctx context.Context) (bool, string, error) {
		list, err := env.C.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name != "now" {
				continue
			}
			if e.Reason == "ProvisioningSucceeded" {
				return false, "", fmt.Errorf("an Immediate claim was provisioned: %s", e.Message)
			}
			if e.Reason == "ProvisioningFailed" && strings.Contains(e.Message, "WaitForFirstConsumer") {
				event = e.Reason + ": " + e.Message
				return true, "", nil
			}
		}
		return false, kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", "now"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Longer than csi-provisioner's node-deployment base delay, after
	// which a node would have taken the claim.
	time.Sleep(25 * time.Second)
	t.Logf("event: %s", event)
	pvc, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "now", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim: phase %s volume %q (%v), want Pending, unbound", pvc.Status.Phase, pvc.Spec.VolumeName, err)
	}
	for e := range dirEntries(t, filepath.Join(env.Pools[kit.PoolLocal], "csi")) {
		if !before[e] {
			t.Errorf("volume directory %s created for a refused Immediate claim", e)
		}
	}
	pvs, err := env.C.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns {
			t.Errorf("pv %s created for claim %s", pv.Name, ref.Name)
		}
	}
}
