package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/test/chaos/probes"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// TestEnforcedClaimsUnderDriverKills is issue 31's invariant "a deleted
// claim leaves no quota ID", where the kernel has project quotas (make
// quota-vm-cluster; the chaos tier's host kernel has none): on both
// enforcing pools at once, claims are deleted and others created while
// hpp-csi is SIGKILLed twice. Then every new claim is Bound within 2
// minutes of the last kill and holds a project ID in its pool's ledger,
// and every deleted claim's volume has left no directory, no staging or
// trash entry, no link in the ledger and no hard limit in the kernel (the
// probes of test/chaos, fed violations in their unit tests).
//
// The claims carry the scheduler's selected-node annotation instead of a
// pod: csi-provisioner provisions a WaitForFirstConsumer claim on that
// word alone, and pods under emulation would add minutes that prove
// nothing about project IDs.
func TestEnforcedClaimsUnderDriverKills(t *testing.T) {
	env := needEnv(t)
	pools := []string{PoolQuota, PoolQuotaExt4}
	for _, p := range pools {
		if why, left := env.NoQuota[p]; left {
			quotaUnavailable(t, why)
		}
	}
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode()
	const kept, churned = 2, 3
	volumes := map[string]string{} // each pool's volumes directory, where its ledger is
	var stores []string
	for _, p := range pools {
		volumes[p] = filepath.Join(env.Pools[p], "csi")
		stores = append(stores, probes.StoreDirs(volumes[p])...)
	}

	claim := func(pool, name string) {
		pvc := kit.PVC(ns, pool+"-"+name, ns+"-"+pool, "16Mi")
		pvc.Annotations = map[string]string{contract.AnnSelectedNode: node.Name}
		createPVC(t, env, pvc)
	}
	for _, p := range pools {
		storageClass(t, env, kit.StorageClass(ns+"-"+p, p))
		for i := range kept + churned {
			claim(p, fmt.Sprintf("a%d", i))
		}
	}
	// What each doomed claim's volume holds before the faults: its
	// directory and its project ID.
	heldBefore := map[string]map[string]uint32{}
	var doomedDirs []string
	for _, p := range pools {
		var pvs []*corev1.PersistentVolume
		for i := range kept + churned {
			pvs = append(pvs, boundPVWithin(t, env, ns, fmt.Sprintf("%s-a%d", p, i), slowVMWait))
		}
		links := quotaLinks(t, volumes[p])
		byVol := map[string]uint32{}
		for id, vol := range links {
			byVol[vol] = id
		}
		heldBefore[p] = map[string]uint32{}
		for i, pv := range pvs {
			id, ok := byVol[pv.Spec.CSI.VolumeHandle]
			if !ok {
				t.Fatalf("volume %s of an enforcing pool %q holds no project ID; the ledger: %v", pv.Spec.CSI.VolumeHandle, p, links)
			}
			if i >= kept {
				heldBefore[p][pv.Spec.CSI.VolumeHandle] = id
				doomedDirs = append(doomedDirs, volumeDir(env.Pools[p], pv))
			}
		}
	}

	// The faults: deletes and creates issued, hpp-csi killed at once (in
	// the VM csi-provisioner is still working through them), then once
	// more 2 s after it is back.
	for _, p := range pools {
		for i := kept; i < kept+churned; i++ {
			deletePVC(t, env, ns, fmt.Sprintf("%s-a%d", p, i))
			claim(p, fmt.Sprintf("b%d", i))
		}
	}
	proc := node.Process("hpp-csi")
	for kill := range 2 {
		if err := proc.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := proc.WaitRunning(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("hpp-csi killed (%d of 2) and running again", kill+1)
		time.Sleep(2 * time.Second) // let it take up some of the work again
	}
	lastFault := time.Now()

	for _, p := range pools {
		for i := kept; i < kept+churned; i++ {
			boundPVWithin(t, env, ns, fmt.Sprintf("%s-b%d", p, i), time.Until(lastFault.Add(2*time.Minute)))
		}
	}
	t.Logf("every new claim Bound %s after the last kill", time.Since(lastFault).Round(100*time.Millisecond))

	kernel := prjquota.NewLinux()
	err := kit.Poll(ctx, slowVMWait, "deleted volumes gone from their pools, their project IDs released", func(context.Context) (bool, string, error) {
		if left, err := probes.Split(probes.CheckLeftovers(doomedDirs, stores)); left != "" || err != nil {
			return false, left, err
		}
		for _, p := range pools {
			links, err := probes.QuotaLinks(volumes[p])
			if err != nil {
				return false, "", err
			}
			limit := func(id uint32) (int64, error) {
				q, err := kernel.Quota(volumes[p], id)
				return q.HardBytes, err
			}
			if held, err := probes.Split(probes.CheckQuotaReleased(links, heldBefore[p], limit)); held != "" || err != nil {
				return false, "pool " + p + ": " + held, err
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The live volumes, old and new, still hold their IDs: the ledger read
	// above is the one hpp-csi keeps.
	for _, p := range pools {
		links := quotaLinks(t, volumes[p])
		held := map[string]bool{}
		for _, vol := range links {
			held[vol] = true
		}
		for _, name := range []string{"a0", "a1", fmt.Sprintf("b%d", kept)} {
			pv := boundPVWithin(t, env, ns, p+"-"+name, time.Minute)
			if !held[pv.Spec.CSI.VolumeHandle] {
				t.Errorf("live volume %s of pool %q holds no project ID after the kills; the ledger: %v", pv.Spec.CSI.VolumeHandle, p, links)
			}
		}
		t.Logf("pool %q: %d project IDs held by live volumes, the %d deleted volumes' IDs released (%v)", p, len(links), churned, heldBefore[p])
	}
}

func quotaLinks(t *testing.T, volumesDir string) map[uint32]string {
	t.Helper()
	links, err := probes.QuotaLinks(volumesDir)
	if err != nil {
		t.Fatal(err)
	}
	return links
}
