package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
	corev1 "k8s.io/api/core/v1"
)

// statsSummary is the part of kubelet's /stats/summary the test reads.
type statsSummary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Volume []struct {
			Name      string  `json:"name"`
			UsedBytes *uint64 `json:"usedBytes"`
			PVCRef    *struct {
				Name string `json:"name"`
			} `json:"pvcRef"`
		} `json:"volume"`
	} `json:"pods"`
}

// Scenario 3: kubelet's stats summary reports each hpp volume's own used
// bytes (from NodeGetVolumeStats), not its pool's: two volumes of one pool
// written with 6 MiB and 1 MiB report about that much each.
func TestKubeletStatsReportVolumeUsage(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	storageClass(t, env, kit.StorageClass(ns, kit.PoolLocal))
	createPVC(t, env, kit.PVC(ns, "big", ns, "64Mi"))
	createPVC(t, env, kit.PVC(ns, "small", ns, "64Mi"))
	script := "dd if=/dev/zero of=/big/f bs=1M count=6 && dd if=/dev/zero of=/small/f bs=1M count=1 && sync && sleep 3600"
	createPod(t, env, kit.OnNode(kit.Pod(ns, "writer", script,
		kit.PodVolume{Name: "big", Claim: "big", Path: "/big"}, kit.PodVolume{Name: "small", Claim: "small", Path: "/small"}), node))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "writer", corev1.PodRunning, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	want := map[string][2]uint64{"big": {6 * mib, 6*mib + 256<<10}, "small": {1 * mib, 1*mib + 256<<10}}
	err := kit.Poll(ctx, 90*time.Second, "stats summary with both volumes' usage", func(ctx context.Context) (bool, string, error) {
		raw, err := env.C.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(ctx)
		if err != nil {
			return false, "", kit.Retry(err)
		}
		var s statsSummary
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, "", err
		}
		got := map[string]uint64{}
		for _, p := range s.Pods {
			if p.PodRef.Namespace != ns || p.PodRef.Name != "writer" {
				continue
			}
			for _, v := range p.Volume {
				if v.PVCRef != nil && v.UsedBytes != nil {
					got[v.PVCRef.Name] = *v.UsedBytes
				}
			}
		}
		for claim, r := range want {
			if got[claim] < r[0] || got[claim] > r[1] {
				return false, fmt.Sprintf("used bytes per claim %v, want big in [%d,%d], small in [%d,%d]", got, want["big"][0], want["big"][1], want["small"][0], want["small"][1]), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
