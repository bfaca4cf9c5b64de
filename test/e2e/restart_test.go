package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario 7: hpp-csi is SIGKILLed in the middle of a burst of
// provisioning and started again: every claim still ends Bound exactly
// once, no directory is orphaned, kubelet re-registers the new process
// (pods started after it mount their volumes), and a pod that was running
// all along keeps its data.
func TestDriverKilledDuringBurst(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode()
	const burst = 20
	csiDir := filepath.Join(env.Pools[kit.PoolLocal], "csi")
	before := dirEntries(t, csiDir)
	storageClass(t, env, kit.StorageClass(ns, kit.PoolLocal))

	createPVC(t, env, kit.PVC(ns, "keep", ns, "16Mi"))
	keeper := `echo precious > /data/f
while true; do [ "$(cat /data/f)" = precious ] || { echo LOST; exit 1; }; sleep 1; done`
	createPod(t, env, kit.OnNode(kit.Pod(ns, "keeper", keeper, kit.PodVolume{Name: "v", Claim: "keep", Path: "/data"}), node.Name))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "keeper", corev1.PodRunning, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	keepPV := boundPV(t, env, ns, "keep")

	for i := range burst {
		name := fmt.Sprintf("burst-%02d", i)
		createPVC(t, env, kit.PVC(ns, name, ns, "16Mi"))
		createPod(t, env, kit.OnNode(kit.Pod(ns, name, "echo "+name+" > /data/f && sleep 3600", kit.PodVolume{Name: "v", Claim: name, Path: "/data"}), node.Name))
	}
	// Kill once provisioning is under way: the first volume of the burst exists.
	if err := kit.Poll(ctx, time.Minute, "first volume of the burst", func(context.Context) (bool, string, error) {
		return len(dirEntries(t, csiDir)) > len(before)+1, "", nil
	}); err != nil {
		t.Fatal(err)
	}
	proc := node.Process("hpp-csi")
	if err := proc.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("hpp-csi killed with %d volume directories present", len(dirEntries(t, csiDir)))
	// The harness restarts it after a second, as kubelet restarts a
	// crashed container; csi-provisioner, which exits when it loses the
	// socket, is restarted the same way.
	if err := proc.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}

	for i := range burst {
		name := fmt.Sprintf("burst-%02d", i)
		if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, name, corev1.PodRunning, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.WaitCSIRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	log := readFile(t, proc.LogPath())
	restarted := log[strings.LastIndex(log, "harness: starting"):]
	if !strings.Contains(restarted, "kubelet registered the plugin") {
		t.Errorf("the restarted hpp-csi was not registered by kubelet; its log:\n%s", restarted)
	}

	// Exactly one PV per claim, and the pool holds exactly their directories.
	pvs, err := env.C.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perClaim := map[string]int{}
	handles := map[string]bool{}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns {
			perClaim[ref.Name]++
			handles[pv.Spec.CSI.VolumeHandle] = true
		}
	}
	if len(perClaim) != burst+1 {
		t.Errorf("%d claims have PVs, want %d", len(perClaim), burst+1)
	}
	for claim, n := range perClaim {
		if n != 1 {
			t.Errorf("claim %s has %d PVs, want 1", claim, n)
		}
	}
	for e := range dirEntries(t, csiDir) {
		if !before[e] && !handles[e] {
			t.Errorf("orphan volume directory %s (no PV)", e)
		}
	}
	for h := range handles {
		if _, err := os.Stat(filepath.Join(csiDir, h)); err != nil {
			t.Errorf("PV's volume directory: %v", err)
		}
	}

	p, err := env.C.Client.CoreV1().Pods(ns).Get(ctx, "keeper", metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("keeper pod after the restart: %v %v", err, kit.PodSummary(p))
	}
	if got := readFile(t, filepath.Join(volumeDir(env.Pools[kit.PoolLocal], keepPV), "f")); got != "precious\n" {
		t.Errorf("keeper's file on the host %q, want %q", got, "precious\n")
	}
}
