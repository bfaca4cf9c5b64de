package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// PoolQuota is the real node's enforcing pool (enforceSize): an XFS of
// quotaPoolSize mounted with prjquota, where the kernel has XFS quotas
// (the quota VM's: `make quota-vm-cluster`); elsewhere it is left out and
// the scenarios on it skip.
const (
	PoolQuota     = "quota"
	quotaPoolSize = 1 << 30
)

// TestEnforcedSizeOnlineExpansion (issue 22, cluster tier, the enforcing
// half): a 100Mi claim on an enforcing pool; the pod's `dd` of 150 MiB
// fails (XFS reports a project over its limit as "No space left on
// device", ext4 as "Disk quota exceeded"); `kubectl patch` to 300Mi while
// the pod runs; within 60 s the claim reports 300Mi and the pod's `df`
// shows it; a 250 MiB write then succeeds, in the same pod, never
// restarted. A claim expanded beyond the pool gets the reason and keeps
// its data and size.
func TestEnforcedSizeOnlineExpansion(t *testing.T) {
	env := needEnv(t)
	if env.NoQuota != "" {
		quotaUnavailable(t, env.NoQuota)
	}
	ns := namespace(t, env)
	ctx := context.Background()
	sc := storageClass(t, env, StorageClass(ns+"-quota", PoolQuota, func(sc *storagev1.StorageClass) {
		sc.AllowVolumeExpansion = ptr.To(true)
	}))
	createPVC(t, env, PVC(ns, "sized", sc.Name, "100Mi"))
	created := time.Now()
	createPod(t, env, Pod(ns, "user", "echo kept > /data/f && sleep 3600", PodVolume{Name: "v", Claim: "sized", Path: "/data"}))
	running, err := WaitPodPhase(ctx, env.C.Client, ns, "user", corev1.PodRunning, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod with the 100Mi claim on enforcing pool %q Running %s after its creation", PoolQuota, time.Since(created).Round(100*time.Millisecond))
	pv := boundPV(t, env, ns, "sized")

	if got := podDFKiB(t, env, ns, "user", "/data"); got != 100<<10 {
		t.Fatalf("df in the pod shows %d KiB for the 100Mi claim, want %d", got, 100<<10)
	}
	out, err := podExec(t, env, ns, "user", "dd if=/dev/zero of=/data/big bs=1M count=150")
	refused := strings.Contains(out, "Disk quota exceeded") || strings.Contains(out, "No space left on device")
	if err == nil || !refused {
		t.Fatalf("dd of 150 MiB into the 100Mi claim: err %v, output %q; want it refused (Disk quota exceeded, or No space left on device on XFS)", err, out)
	}
	t.Logf("dd of 150 MiB into the 100Mi claim: %s", firstLine(out))

	patched := time.Now()
	kubectlPatchSize(t, env, ns, "sized", "300Mi")
	waitClaimCapacity(t, env, ns, "sized", "300Mi", 60*time.Second)
	claimAt := time.Since(patched)
	var df int64
	err = Poll(ctx, 60*time.Second-time.Since(patched), "df in the pod shows 300Mi", func(context.Context) (bool, string, error) {
		df = podDFKiB(t, env, ns, "user", "/data")
		return df == 300<<10, fmt.Sprintf("df shows %d KiB", df), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after kubectl patch to 300Mi: the claim reported 300Mi in %s, the pod's df %d KiB in %s",
		claimAt.Round(100*time.Millisecond), df, time.Since(patched).Round(100*time.Millisecond))
	if out, err := podExec(t, env, ns, "user", "dd if=/dev/zero of=/data/big bs=1M count=250 && sync && ls -l /data/big"); err != nil {
		t.Fatalf("250 MiB write after the expansion to 300Mi: %v: %s", err, out)
	} else {
		t.Logf("250 MiB write after the expansion: %s", strings.TrimSpace(out))
	}
	assertSamePod(t, env, running)

	expandBeyondPool(t, env, ns, "sized", PoolQuota, filepath.Join(volumeDir(env.Pools[PoolQuota], pv), "f"), running)
}

// quotaUnavailable skips a scenario that needs the enforcing pool; in the
// quota VM's cluster tier (HPP_QUOTA_TIER=vm) under CI=true it fails: that
// tier exists to run it.
func quotaUnavailable(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" && os.Getenv("HPP_QUOTA_TIER") == "vm" {
		t.Fatalf("no enforcing pool in the quota VM tier: %s", reason)
	}
	t.Skipf("skipping: no enforcing pool on this kernel (`make quota-vm-cluster` runs this scenario in a VM whose kernel has XFS quotas): %s", reason)
}

// podExec runs script with sh in the pod's container (kubectl exec, as a
// user would) and returns its combined output.
func podExec(t *testing.T, env *Env, ns, pod, script string) (string, error) {
	t.Helper()
	cache := os.Getenv("HPP_CACHE")
	if cache == "" {
		cache, _ = cluster.DefaultCacheDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.BinariesFromCache(cache).Kubectl, "--kubeconfig="+env.C.Kubeconfig,
		"-n", ns, "exec", pod, "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl exec %s -- sh -c %q: %w", pod, script, err)
	}
	return string(out), nil
}

// podDFKiB is the size in KiB that `df` in the pod shows for path.
func podDFKiB(t *testing.T, env *Env, ns, pod, path string) int64 {
	t.Helper()
	out, err := podExec(t, env, ns, pod, "df -Pk "+path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(lines) < 2 || len(f) < 2 {
		t.Fatalf("df -Pk %s in pod %s: unexpected output %q", path, pod, out)
	}
	kib, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatalf("df -Pk %s in pod %s: size %q: %v", path, pod, f[1], err)
	}
	return kib
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
