package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Scenario 1: a WaitForFirstConsumer claim is provisioned on the real node
// into <pool>/csi/pvc-<uid>, a pod's file lands there, a second pod reads
// it back, and the reclaim policy decides whether the directory outlives
// the claim.
func TestProvisionWriteReadDelete(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	storageClass(t, env, kit.StorageClass(ns+"-delete", kit.PoolLocal))

	claim := createPVC(t, env, kit.PVC(ns, "data", ns+"-delete", "64Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "writer", "echo hello-hpp > /data/file", kit.PodVolume{Name: "v", Claim: "data", Path: "/data"}), node))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "writer", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	pv := boundPV(t, env, ns, "data")
	if want := "pvc-" + string(claim.UID); pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != want || pv.Spec.CSI.Driver != contract.DriverName {
		t.Fatalf("pv %s csi source %+v, want driver %s handle %s", pv.Name, pv.Spec.CSI, contract.DriverName, want)
	}
	assertNodeAffinity(t, pv, node)
	dir := volumeDir(env.Pools[kit.PoolLocal], pv)
	if got := readFile(t, dir+"/file"); got != "hello-hpp\n" {
		t.Errorf("%s/file on the host = %q, want %q", dir, got, "hello-hpp\n")
	}

	createPod(t, env, kit.OnNode(kit.Pod(ns, "reader", "cat /data/file", kit.PodVolume{Name: "v", Claim: "data", Path: "/data", ReadOnly: true}), node))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "reader", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if logs, err := kit.PodLogs(ctx, env.C.Client, ns, "reader"); err != nil || logs != "hello-hpp\n" {
		t.Errorf("reader log %q (%v), want %q", logs, err, "hello-hpp\n")
	}

	deletePodNow(t, env, ns, "writer")
	deletePodNow(t, env, ns, "reader")
	deletePVC(t, env, ns, "data")
	waitPVGone(t, env, pv.Name)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("reclaim Delete: %s still exists after the PV is gone (stat: %v)", dir, err)
	}

	t.Run("Retain", func(t *testing.T) {
		storageClass(t, env, kit.StorageClass(ns+"-retain", kit.PoolLocal, kit.Retain))
		createPVC(t, env, kit.PVC(ns, "kept", ns+"-retain", "64Mi"))
		createPod(t, env, kit.OnNode(kit.Pod(ns, "keeper", "echo keep-me > /data/file", kit.PodVolume{Name: "v", Claim: "kept", Path: "/data"}), node))
		if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "keeper", corev1.PodSucceeded, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		pv := boundPV(t, env, ns, "kept")
		dir := volumeDir(env.Pools[kit.PoolLocal], pv)
		deletePodNow(t, env, ns, "keeper")
		deletePVC(t, env, ns, "kept")
		if err := kit.Poll(ctx, time.Minute, "pv "+pv.Name+" Released", func(ctx context.Context) (bool, string, error) {
			p, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return p.Status.Phase == corev1.VolumeReleased, string(p.Status.Phase), nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, dir+"/file"); got != "keep-me\n" {
			t.Errorf("reclaim Retain: %s/file = %q, want %q", dir, got, "keep-me\n")
		}
		// An administrator's cleanup of a retained volume.
		if err := env.C.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPVGone(t, env, pv.Name)
		if got := readFile(t, dir+"/file"); got != "keep-me\n" {
			t.Errorf("reclaim Retain: deleting the PV object removed the data (%q)", got)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	})
}

// assertNodeAffinity checks the PV may only be used on node, through
// hpp-csi's topology key.
func assertNodeAffinity(t *testing.T, pv *corev1.PersistentVolume, node string) {
	t.Helper()
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) != 1 {
		t.Fatalf("pv %s node affinity %+v: want one required term", pv.Name, pv.Spec.NodeAffinity)
	}
	exprs := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions
	if len(exprs) != 1 || exprs[0].Key != contract.TopologyKey || exprs[0].Operator != corev1.NodeSelectorOpIn ||
		strings.Join(exprs[0].Values, ",") != node {
		t.Errorf("pv %s node affinity %+v: want %s In [%s]", pv.Name, exprs, contract.TopologyKey, node)
	}
}
