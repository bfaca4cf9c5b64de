package conformance

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// checkout is the repository root, found from this file: the tier always
// runs from a checkout.
func checkout(t *testing.T) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the checkout")
	}
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// TestExternalStorage is the conformance tier; `make conformance` runs it
// with HPP_TEST_TIER=conformance. Without its prerequisites (root, the
// cluster and conformance binaries) it skips with the reason, and fails
// under CI=true, where a missing tier must not pass silently.
func TestExternalStorage(t *testing.T) {
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "conformance" {
		t.Skipf("the conformance tier runs with `make conformance` (HPP_TEST_TIER=conformance), this is tier %q", tier)
	}
	cache, err := cluster.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	snapshotter, err := cluster.SnapshotterFromCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Root:        checkout(t),
		Cluster:     cluster.BinariesFromCache(cache),
		Tools:       ToolsFromCache(cache),
		Snapshotter: snapshotter,
		OutputDir:   os.Getenv("HPP_CONFORMANCE_OUTPUT"),
		Narrow:      os.Getenv("HPP_CONFORMANCE_FOCUS"),
	}
	if v := os.Getenv("HPP_CONFORMANCE_PROCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HPP_CONFORMANCE_PROCS=%q: want a whole number of ginkgo processes, at least 1", v)
		}
		opts.Procs = n
	}
	if opts.OutputDir == "" {
		opts.OutputDir = filepath.Join(opts.Root, "_output", "conformance")
	}
	if dir := os.Getenv("HPP_BIN_DIR"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "hpp-csi")); err == nil {
			opts.HPPCSI = filepath.Join(dir, "hpp-csi")
		}
	}
	missing := ""
	if os.Geteuid() != 0 {
		missing = "needs root (kubelet, containerd, mounts)"
	} else if err := opts.Cluster.Validate(); err != nil {
		missing = err.Error()
	} else if err := opts.Tools.Validate(); err != nil {
		missing = err.Error()
	}
	if missing != "" {
		testutil.MissingPrerequisite(t, "conformance tier: %s", missing)
	}
	deadline, ok := t.Deadline()
	if ok {
		// Leave ginkgo time to write its report and the cluster time to stop.
		opts.Timeout = time.Until(deadline).Truncate(time.Minute) - 5*time.Minute
	}
	sum, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Passed == 0 {
		t.Fatalf("no spec passed (%s): the focus selected nothing?", sum)
	}
}
