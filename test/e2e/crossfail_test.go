package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Failure tier of issue 28, on one simulated source node ("golden-f", its
// own hpp-csi at 127.0.0.3) and the real node:
//
//   - the receiving hpp-csi SIGKILLed while the stream arrives: nothing is
//     left in the pool's staging or the clone cache's, and the claim is
//     Bound with the source's bytes once hpp-csi is back (restarted as a
//     crash would be) and csi-provisioner retries;
//   - the sending hpp-csi SIGKILLed while it streams (a second source, in
//     the fast pool, which no cache holds): the same;
//   - the source's node down (its hpp-csi stopped) for a new clone: within
//     30 s an event on the claim names the node and why it cannot be
//     reached; once it is back, the clone completes.
//
// The sources hold failureSourceMiB (1 GiB apparent), enough for a stream
// to be caught in flight by polling the metrics (the kills came within the
// first MiB on this machine); each kill is checked to have cut a stream,
// not to have come after it.
func TestCrossNodeFailures(t *testing.T) {
	env := needEnv(t)
	ctx := context.Background()
	real := env.C.RealNode()
	golden, err := env.AddPeerNode(ctx, "golden-f", net.IPv4(127, 0, 0, 3), nil, kit.PoolFast)
	if golden != nil {
		t.Cleanup(func() {
			if err := env.C.RemoveSimulatedNode(context.Background(), "golden-f"); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, env)
	local, fast := ns+"-local", ns+"-fast"
	storageClass(t, env, kit.StorageClass(local, kit.PoolLocal))
	storageClass(t, env, kit.StorageClass(fast, kit.PoolFast))
	srcLocal := goldenSource(t, env, golden, ns, "golden-local", local, kit.PoolLocal)
	srcFast := goldenSource(t, env, golden, ns, "golden-fast", fast, kit.PoolFast)

	t.Run("receiver killed during the copy", func(t *testing.T) {
		cloneKilledMidStream(t, env, ns, "killed-receiver", local, srcLocal, real, real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("sender killed during the copy", func(t *testing.T) {
		cloneKilledMidStream(t, env, ns, "killed-sender", fast, srcFast, golden, real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolFast])
	})
	t.Run("source node down", func(t *testing.T) {
		proc := golden.Process("hpp-csi")
		if err := proc.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		claim := "while-down"
		startClone(t, env, ns, claim, local, srcLocal.claim, real.Name)
		// The event says which node and why: what a user needs to act.
		start := time.Now()
		var events string
		if err := kit.Poll(ctx, 30*time.Second, "an event on the claim naming the source's node and the reason", func(ctx context.Context) (bool, string, error) {
			events = kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
			return strings.Contains(events, "node golden-f") && strings.Contains(events, "connection refused"), events, nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("event after %s:\n%s", time.Since(start).Round(time.Second), events)
		if err := proc.Restart(); err != nil {
			t.Fatal(err)
		}
		readBack(t, env, ns, claim, srcLocal.sums)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
}

// failureSourceMiB is what the failure tier's sources hold: small, to keep
// the tier short, yet a stream of several hundred milliseconds.
const failureSourceMiB = 48

// goldenSrc is a golden image claim on the source node.
type goldenSrc struct {
	claim     string
	allocated int64
	sums      []string
}

func goldenSource(t *testing.T, env *kit.Env, golden *cluster.Node, ns, claim, class, pool string) goldenSrc {
	t.Helper()
	pvc := kit.PVC(ns, claim, class, "2Gi")
	pvc.Annotations = map[string]string{contract.AnnSelectedNode: golden.Name}
	createPVC(t, env, pvc)
	pv := boundPV(t, env, ns, claim)
	dir := volumeDir(filepath.Join(golden.Dir(), "pools", pool), pv)
	if err := kit.WriteGoldenImage(dir, failureSourceMiB); err != nil {
		t.Fatal(err)
	}
	return goldenSrc{claim: claim, allocated: allocatedBytes(t, dir), sums: treeSums(t, dir)}
}

// startClone creates claim, cloned from source, and a pod on node that
// prints the checksums of the clone's files.
func startClone(t *testing.T, env *kit.Env, ns, claim, class, source, node string) {
	t.Helper()
	pvc := kit.PVC(ns, claim, class, "2Gi")
	pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	createPVC(t, env, pvc)
	script := "cd /data && find . -type f | sort | xargs sha256sum"
	createPod(t, env, kit.OnNode(kit.Pod(ns, "read-"+claim, script, kit.PodVolume{Name: "v", Claim: claim, Path: "/data"}), node))
}

// readBack waits for the clone's pod ("read-<claim>"), compares the
// checksums it printed with want, and returns its output.
func readBack(t *testing.T, env *kit.Env, ns, claim string, want []string) string {
	t.Helper()
	ctx := context.Background()
	pod := "read-" + claim
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, pod, corev1.PodSucceeded, 5*time.Minute); err != nil {
		t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim))
	}
	logs, err := kit.PodLogs(ctx, env.C.Client, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := podSums(logs); !equalSums(got, want) {
		t.Errorf("%s: the pod read\n%v\nwant the source's\n%v", claim, got, want)
	}
	return logs
}

// cloneKilledMidStream starts a clone of src and SIGKILLs victim's hpp-csi
// as soon as the source's node has sent part of the stream, then checks
// that the kill cut it (not all was received before), and that the clone
// completes once hpp-csi is back (it restarts as after a crash).
func cloneKilledMidStream(t *testing.T, env *kit.Env, ns, claim, class string, src goldenSrc, victim, receiver *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	golden := env.C.Node("golden-f")
	base := int64(metricSum(t, golden, "hpp_peer_sent_bytes_total"))
	startClone(t, env, ns, claim, class, src.claim, receiver.Name)
	var sent int64
	if err := kit.PollEvery(ctx, 2*time.Minute, 5*time.Millisecond, "the source's node streaming", func(ctx context.Context) (bool, string, error) {
		v, err := kit.MetricSum(ctx, golden, "hpp_peer_sent_bytes_total")
		if err != nil {
			return false, "", kit.Retry(err)
		}
		sent = int64(v) - base
		return sent > 0, "nothing sent yet", nil
	}); err != nil {
		t.Fatal(err)
	}
	proc := victim.Process("hpp-csi")
	if err := proc.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("hpp-csi on %s killed with %d of %d bytes sent", victim.Name, sent, src.allocated)
	if sent >= src.allocated {
		t.Fatalf("the stream had ended (%d bytes sent of %d) before hpp-csi on %s was killed: the kill cut nothing", sent, src.allocated, victim.Name)
	}
	if err := proc.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	readBack(t, env, ns, claim, src.sums)
}

// assertNoCopyLeftovers checks the pool on disk: no staged create in its
// staging, nothing in the clone cache's staging, and every cache entry
// whole (its record and its data).
func assertNoCopyLeftovers(t *testing.T, poolPath string) {
	t.Helper()
	root := filepath.Join(poolPath, "csi")
	staged, err := os.ReadDir(filepath.Join(root, dirvol.StagingDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range staged {
		if strings.Contains(e.Name(), ".create-") {
			t.Errorf("pool staging holds %s", e.Name())
		}
	}
	cache := filepath.Join(root, clonecache.Dir)
	left, err := os.ReadDir(filepath.Join(cache, clonecache.StagingDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("clone cache staging holds %s", e.Name())
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == clonecache.StagingDir {
			continue
		}
		for _, part := range []string{clonecache.RecordFile, clonecache.DataDir} {
			if _, err := os.Stat(filepath.Join(cache, e.Name(), part)); err != nil {
				t.Errorf("clone cache entry %s: %v", e.Name(), err)
			}
		}
	}
}
