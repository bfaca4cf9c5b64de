package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// PoolCapacity is a pool on a size-limited tmpfs, present on the real node
// (realNodeCapacity bytes) and on the capacity scenario's simulated nodes.
const (
	PoolCapacity     = "cap"
	realNodeCapacity = 1 << 30
)

// Scenario 4: the scheduler places pods by the CSIStorageCapacity that each
// node's csi-provisioner publishes: a claim that fits on one node only
// lands there, and one that fits nowhere leaves its pod Pending with the
// scheduler's reason and nothing created anywhere.
func TestCapacityAwareScheduling(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	real := env.C.RealNode()
	pools := map[string]string{real.Name: env.Pools[PoolCapacity]}
	sizes := map[string]int64{real.Name: realNodeCapacity}
	for name, size := range map[string]int64{"sim-a": 64 << 20, "sim-b": 256 << 20} {
		n := addSimulatedCSINode(t, env, name)
		path := filepath.Join(n.Dir(), "pools", PoolCapacity)
		if err := cluster.MountTmpfs(path, size); err != nil {
			t.Fatal(err)
		}
		if err := n.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: env.HPPCSI, Pools: []cluster.Pool{{Name: PoolCapacity, Path: path}}}); err != nil {
			t.Fatal(err)
		}
		pools[name], sizes[name] = path, size
	}
	sc := storageClass(t, env, kit.StorageClass(ns, PoolCapacity))
	waitCapacities(t, env, sc.Name, sizes)

	// 512Mi fits on the real node only.
	createPVC(t, env, kit.PVC(ns, "fits-real", sc.Name, "512Mi"))
	createPod(t, env, kit.Pod(ns, "on-real", "echo big > /data/f && sleep 3600", kit.PodVolume{Name: "v", Claim: "fits-real", Path: "/data"}))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "on-real", corev1.PodRunning, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	pv := boundPV(t, env, ns, "fits-real")
	assertNodeAffinity(t, pv, real.Name)
	if got := readFile(t, filepath.Join(volumeDir(pools[real.Name], pv), "f")); got != "big\n" {
		t.Errorf("file on the real node's pool %q, want %q", got, "big\n")
	}

	// 200Mi among the simulated nodes fits on sim-b only (sim-a has 64Mi).
	createPVC(t, env, kit.PVC(ns, "fits-b", sc.Name, "200Mi"))
	onSim := kit.Pod(ns, "on-sim", "true", kit.PodVolume{Name: "v", Claim: "fits-b", Path: "/data"})
	onSim.Spec.NodeSelector = map[string]string{cluster.SimulatedLabel: "true"}
	createPod(t, env, onSim)
	pv = boundPV(t, env, ns, "fits-b")
	assertNodeAffinity(t, pv, "sim-b")
	if fi, err := os.Stat(volumeDir(pools["sim-b"], pv)); err != nil || !fi.IsDir() {
		t.Errorf("volume directory on sim-b's pool: %v", err)
	}
	// The scheduler binds the pod once the volume is bound (PreBind).
	if err := kit.Poll(ctx, time.Minute, "pod on-sim bound to sim-b", func(ctx context.Context) (bool, string, error) {
		p, err := env.C.Client.CoreV1().Pods(ns).Get(ctx, "on-sim", metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		if p.Spec.NodeName != "" && p.Spec.NodeName != "sim-b" {
			return false, "", fmt.Errorf("scheduled to %s", p.Spec.NodeName)
		}
		return p.Spec.NodeName == "sim-b", kit.PodSummary(p), nil
	}); err != nil {
		t.Error(err)
	}

	// 4Gi fits nowhere: Pending with the scheduler's reason, nothing created.
	before := map[string]map[string]bool{}
	for n, p := range pools {
		before[n] = dirEntries(t, filepath.Join(p, "csi"))
	}
	createPVC(t, env, kit.PVC(ns, "fits-nowhere", sc.Name, "4Gi"))
	createPod(t, env, kit.Pod(ns, "nowhere", "true", kit.PodVolume{Name: "v", Claim: "fits-nowhere", Path: "/data"}))
	err := kit.Poll(ctx, time.Minute, "pod nowhere Unschedulable for lack of storage", func(ctx context.Context) (bool, string, error) {
		p, err := env.C.Client.CoreV1().Pods(ns).Get(ctx, "nowhere", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, "did not have enough free storage") {
				t.Logf("scheduler: %s", c.Message)
				return true, "", nil
			}
		}
		return false, kit.PodSummary(p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pvc, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "fits-nowhere", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim fits-nowhere: phase %s volume %q (%v), want Pending and unbound", pvc.Status.Phase, pvc.Spec.VolumeName, err)
	}
	for n, p := range pools {
		for e := range dirEntries(t, filepath.Join(p, "csi")) {
			if !before[n][e] {
				t.Errorf("node %s: volume directory %s appeared for a claim that fits nowhere", n, e)
			}
		}
	}

	// Claims go while the simulated nodes' drivers still run, so their
	// volumes are deleted by them.
	for _, pod := range []string{"on-real", "on-sim", "nowhere"} {
		_ = env.C.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	for _, claim := range []string{"fits-real", "fits-b", "fits-nowhere"} {
		deletePVC(t, env, ns, claim)
	}
	if err := kit.Poll(ctx, 2*time.Minute, "volumes of the scenario deleted", func(context.Context) (bool, string, error) {
		left := 0
		for _, p := range pools {
			left += len(dirEntries(t, filepath.Join(p, "csi")))
		}
		return left == 0, fmt.Sprintf("%d volume directories left", left), nil
	}); err != nil {
		t.Error(err)
	}
}

// waitCapacities waits until every node has a CSIStorageCapacity for the
// class whose capacity is its pool's size (tmpfs: free = size, give or
// take a few KiB).
func waitCapacities(t *testing.T, env *kit.Env, class string, sizes map[string]int64) {
	t.Helper()
	err := kit.Poll(context.Background(), 90*time.Second, "CSIStorageCapacity per node for "+class, func(ctx context.Context) (bool, string, error) {
		list, err := env.C.Client.StorageV1().CSIStorageCapacities(cluster.CSINamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		got := map[string]*resource.Quantity{}
		for i := range list.Items {
			c := &list.Items[i]
			if c.StorageClassName != class || c.NodeTopology == nil || c.Capacity == nil {
				continue
			}
			got[c.NodeTopology.MatchLabels[contract.TopologyKey]] = c.Capacity
		}
		for node, size := range sizes {
			q := got[node]
			if q == nil || q.Value() < size-(1<<20) || q.Value() > size {
				return false, fmt.Sprintf("capacities %v, want about %v", got, sizes), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addSimulatedCSINode adds a simulated node with its own hpp-csi for the
// test, and removes it when the test ends.
func addSimulatedCSINode(t *testing.T, env *kit.Env, name string) *cluster.Node {
	t.Helper()
	n, err := env.C.AddSimulatedCSINode(context.Background(), name, cluster.SimulatedNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.C.RemoveSimulatedNode(context.Background(), name); err != nil {
			t.Error(err)
		}
	})
	return n
}
