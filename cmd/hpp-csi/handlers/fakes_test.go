package handlers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools/poolstest"
	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

type harness struct {
	d       *Driver
	rt      *pools.Runtime
	mounter *poolstest.Mounter
	fs      *poolstest.FS
	labeler *poolstest.Labeler
	pools   map[string]string // name -> path, the volumes directory <dir>/<name>/csi
	dir     string
	cfg     Config
	quota   prjquota.Backend
	// remote, when set before newDriver, serves sources of other nodes.
	remote pools.RemoteSources
	// claims, when set before newDriver, answers the sweep of uncollected
	// copies.
	claims pools.ClaimLookup
}

const testNode = "node-a"

// newHarness builds a driver over real temp pools "fast" and "slow" with
// fake mounts and statfs (1 GiB, 512 MiB free) unless a test changes them,
// and opens the pools as run does before serving. Each pool is laid out as a
// deployment does it: the host pool directory <dir>/<name> exists, and the
// pool path is its csi/ subdirectory, which OpenPools creates.
func newHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	h := newUnopenedHarness(t, mutate...)
	if err := h.rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// newUnopenedHarness is newHarness without OpenPools.
func newUnopenedHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	return newUnopenedHarnessOver(t, nil, mutate...)
}

// newUnopenedHarnessOver is newUnopenedHarness whose pools enforce sizes
// with the quota backend q (nil: none, as without project quotas).
func newUnopenedHarnessOver(t testing.TB, q prjquota.Backend, mutate ...func(*Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{dir: dir, quota: q, pools: map[string]string{"fast": filepath.Join(dir, "fast", "csi"), "slow": filepath.Join(dir, "slow", "csi")}}
	var cfgPools []pool.Pool
	for _, name := range []string{"fast", "slow"} {
		if err := os.MkdirAll(filepath.Dir(h.pools[name]), 0o755); err != nil {
			t.Fatal(err)
		}
		cfgPools = append(cfgPools, pool.Pool{Name: name, Path: h.pools[name]})
	}
	set, err := pool.NewSet(cfgPools)
	if err != nil {
		t.Fatal(err)
	}
	h.mounter = poolstest.NewMounter()
	h.fs = poolstest.NewFS(h.mounter)
	for _, p := range h.pools {
		h.fs.SetStats(p, gib(1, 0.5))
	}
	h.labeler = &poolstest.Labeler{}
	h.cfg = Config{DriverName: contract.DriverName, Config: pools.Config{NodeID: testNode, Pools: set, StatsCacheTTL: 60e9, StatsTimeout: 10e9}}
	for _, m := range mutate {
		m(&h.cfg)
	}
	h.d, h.rt = h.newDriver(t)
	return h
}

// newDriver builds a driver and its pool runtime over the harness's pools
// and fakes, as a start (or restart) of hpp-csi does; the pools are not
// opened yet.
func (h *harness) newDriver(t testing.TB) (*Driver, *pools.Runtime) {
	t.Helper()
	metrics := NewMetrics()
	rt, err := pools.New(h.cfg.Config, pools.Deps{Mounter: h.mounter, Labeler: h.labeler, FS: h.fs, Quota: h.quota, Metrics: metrics.Registry, Remote: h.remote, Claims: h.claims})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(h.cfg, rt, Deps{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	return d, rt
}

// mustCreate creates the volume req asks for; a test cannot go on without
// it.
func (h *harness) mustCreate(t testing.TB, req *csi.CreateVolumeRequest) {
	t.Helper()
	if _, err := h.d.CreateVolume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// offered is the capacity GetCapacity offers in pool poolName; a failed
// call fails the test.
func (h *harness) offered(t testing.TB, poolName string) int64 {
	t.Helper()
	resp, err := h.d.GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: map[string]string{contract.ParamStoragePool: poolName}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetAvailableCapacity()
}

// gib is a statfs result of total GiB with the given fraction free.
func gib(total float64, free float64) capacity.Stats {
	t := int64(total * (1 << 30))
	a := int64(float64(t) * free)
	return capacity.Stats{TotalBytes: t, AvailableBytes: a, UsedBytes: t - a, TotalInodes: 1000, FreeInodes: 900, UsedInodes: 100}
}

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func onNode(node string) *csi.TopologyRequirement {
	t := &csi.Topology{Segments: map[string]string{contract.TopologyKey: node}}
	return &csi.TopologyRequirement{Requisite: []*csi.Topology{t}, Preferred: []*csi.Topology{t}}
}

func createReq(name, poolName string, size int64) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:                      name,
		CapacityRange:             &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities:        []*csi.VolumeCapability{mountCap()},
		Parameters:                map[string]string{contract.ParamStoragePool: poolName},
		AccessibilityRequirements: onNode(testNode),
	}
}
