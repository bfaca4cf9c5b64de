// Package chaos is the chaos tier (issue 31, `make chaos`): a local
// cluster (test/cluster) whose real node runs hpp-csi and the sidecars as
// users run them, a workload that writes and churns claims, and faults drawn
// from a printed seed (test/chaos/plan) injected while it runs. Invariants
// are checked during the run and at its end; the report prints the faults,
// the operations and create-to-Bound latency with and without faults.
//
// hpp-operator and hpp-mounter exist only as the operator's pods, so their
// kills, the CR back to Available and the pvcTemplate pools (one on a Block
// claim) are the operator-on-node tier's, where the operator is installed
// (test/onnode/faults_test.go, from the same plan and records packages).
package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/chaos/plan"
	"github.com/hostpath-provisioner/hpp/test/chaos/records"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

const (
	// poolFull is a small tmpfs pool that the "fill pool" fault fills to
	// ENOSPC; one writer lives on it.
	poolFull     = "full"
	poolFullSize = 256 << 20
	// settleAfterFaults is the bound: every claim Bound within 2
	// minutes of the last fault.
	settleAfterFaults = 2 * time.Minute
	// baselineLength is the fault-free phase whose create-to-Bound
	// latencies the chaos phase is compared with.
	baselineLength = time.Minute
	ns             = "chaos"
)

// faultSpecs are the kinds the schedule draws, with weights (kills of the
// busiest components more often) and the durations of the lasting ones.
var faultSpecs = []plan.Spec{
	{Kind: killHPPCSI, Weight: 4},
	{Kind: killProvisioner, Weight: 3},
	{Kind: killResizer, Weight: 1},
	{Kind: killController, Weight: 1},
	{Kind: killSnapshotter, Weight: 2},
	{Kind: killSnapshotController, Weight: 1},
	{Kind: restartKubelet, Weight: 2},
	{Kind: restartContainerd, Weight: 1},
	{Kind: restartAPIServer, Weight: 2},
	{Kind: fillPool, Weight: 2, Min: 10 * time.Second, Max: 40 * time.Second},
	// The cut: 30 s, long enough for kubelet's and the sidecars'
	// watches to notice, short of controller-manager's node-monitor grace
	// period (50 s by default since Kubernetes 1.32) after which the node
	// would turn NotReady.
	{Kind: cutNode, Weight: 1, Min: 30 * time.Second, Max: 30 * time.Second},
}

func TestChaos(t *testing.T) {
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "chaos" {
		t.Skipf("the chaos tier runs with `make chaos` (HPP_TEST_TIER=chaos), this is tier %q", tier)
	}
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "chaos: needs root (kubelet, containerd, mounts)")
	}
	cache, _ := cluster.CacheDir()
	binaries := cluster.BinariesFromCache(cache)
	if err := binaries.Validate(); err != nil {
		testutil.MissingPrerequisite(t, "chaos: %v", err)
	}
	snapshotter, err := cluster.SnapshotterFromCache(cache)
	if err != nil {
		testutil.MissingPrerequisite(t, "chaos: snapshots: %v", err)
	}
	seed, err := plan.SeedFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	length, err := envDuration("HPP_CHAOS_LENGTH", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	schedule, err := plan.New(seed, length, 15*time.Second, faultSpecs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos seed %d (replay: HPP_CHAOS_SEED=%d make chaos), %v of faults:\n%s", seed, seed, length, schedule)

	ctx := context.Background()
	env, err := kit.Setup(ctx, kit.SetupOptions{Binaries: binaries, Logf: t.Logf, HandleSignals: true,
		TmpfsPools: map[string]int64{poolFull: poolFullSize}, Snapshotter: &snapshotter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.C.DumpLogTails(os.Stdout, 30)
			dir := filepath.Join(os.TempDir(), fmt.Sprintf("hpp-chaos-logs-%d", seed))
			if err := env.C.SaveLogs(dir); err == nil {
				t.Logf("cluster logs saved in %s", dir)
			}
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := env.Stop(stopCtx); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	writerBin := filepath.Join(env.C.Dir, "chaosbin", "writer")
	if err := records.BuildWriter(ctx, writerBin); err != nil {
		t.Fatal(err)
	}
	r := newRun(t, env, filepath.Dir(writerBin), schedule)
	r.setUp(ctx)
	r.setUpStatefulSet(ctx)
	r.levelsBefore = r.levels(ctx)

	// Without faults first: the latencies the chaos phase is compared with.
	r.churnFor(ctx, baselineLength, &r.baseline)
	start := time.Now()
	injected := r.inject(ctx, start)
	watch := r.watch(ctx)
	r.churnFor(ctx, length, &r.chaotic)
	<-injected
	lastFault := start.Add(schedule.Faults[len(schedule.Faults)-1].At + schedule.Faults[len(schedule.Faults)-1].For)
	r.settle(ctx, lastFault.Add(settleAfterFaults))
	watch()
	r.checkAtEnd(ctx)
	r.report()
}

// envDuration reads a duration from the environment, def when unset.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 30m", name, v)
	}
	return d, nil
}
