package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
	corev1 "k8s.io/api/core/v1"
)

// Scenario 5: two pools on one node, one StorageClass each: every volume
// lands in its class's pool and nowhere else.
func TestTwoPoolsTwoClasses(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	storageClass(t, env, kit.StorageClass(ns+"-local", kit.PoolLocal))
	storageClass(t, env, kit.StorageClass(ns+"-fast", kit.PoolFast))
	createPVC(t, env, kit.PVC(ns, "on-local", ns+"-local", "16Mi"))
	createPVC(t, env, kit.PVC(ns, "on-fast", ns+"-fast", "16Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "both", "echo L > /l/f && echo F > /f/f",
		kit.PodVolume{Name: "l", Claim: "on-local", Path: "/l"}, kit.PodVolume{Name: "f", Claim: "on-fast", Path: "/f"}), node))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "both", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for claim, c := range map[string]struct{ pool, other, content string }{
		"on-local": {kit.PoolLocal, kit.PoolFast, "L\n"},
		"on-fast":  {kit.PoolFast, kit.PoolLocal, "F\n"},
	} {
		pv := boundPV(t, env, ns, claim)
		if got := readFile(t, filepath.Join(volumeDir(env.Pools[c.pool], pv), "f")); got != c.content {
			t.Errorf("claim %s: file in pool %s = %q, want %q", claim, c.pool, got, c.content)
		}
		if _, err := os.Stat(volumeDir(env.Pools[c.other], pv)); !os.IsNotExist(err) {
			t.Errorf("claim %s: a directory also exists in pool %s (stat: %v)", claim, c.other, err)
		}
	}
}
