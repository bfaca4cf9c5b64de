package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// fakeMounter records bind mounts instead of making them.
type fakeMounter struct {
	mu      sync.Mutex
	mounts  map[string]string // target -> source
	readOnl map[string]bool
	failOn  string
}

func newFakeMounter() *fakeMounter {
	return &fakeMounter{mounts: map[string]string{}, readOnl: map[string]bool{}}
}

func (m *fakeMounter) BindMount(source, target string, ro bool, _ []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failOn == target {
		return os.ErrPermission
	}
	m.mounts[target] = source
	m.readOnl[target] = ro
	return nil
}

func (m *fakeMounter) Unmount(target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mounts, target)
	return nil
}

func (m *fakeMounter) IsMountPoint(p string) (bool, error) {
	if _, err := os.Lstat(p); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounts[p]
	return ok, nil
}

func (m *fakeMounter) BindTargets(source string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for t, s := range m.mounts {
		if s == source {
			out = append(out, t)
		}
	}
	return out, nil
}

// fakeFS is the real filesystem with statfs, device ids and usage walks
// under the test's control.
type fakeFS struct {
	OSHostFS
	mu      sync.Mutex
	stats   map[string]capacity.Stats // by pool path; missing = real statfs
	devices map[string]uint64
	walks   int
	mounter *fakeMounter
}

func (f *fakeFS) Statfs(p string) (capacity.Stats, error) {
	f.mu.Lock()
	st, ok := f.stats[p]
	f.mu.Unlock()
	if ok {
		return st, nil
	}
	return f.OSHostFS.Statfs(p)
}

func (f *fakeFS) DeviceOf(p string) (uint64, error) {
	dev, err := f.OSHostFS.DeviceOf(p)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.devices[p]; ok {
		return d, nil
	}
	return dev, nil
}

// SameFile follows the fake mounts: a target "is" its source.
func (f *fakeFS) SameFile(a, b string) (bool, error) {
	f.mounter.mu.Lock()
	src, ok := f.mounter.mounts[b]
	f.mounter.mu.Unlock()
	if ok {
		return src == a, nil
	}
	return f.OSHostFS.SameFile(a, b)
}

func (f *fakeFS) Usage(ctx context.Context, p string) (dirvol.Usage, error) {
	f.mu.Lock()
	f.walks++
	f.mu.Unlock()
	return dirvol.DirUsage(ctx, p)
}

func (f *fakeFS) setStats(p string, st capacity.Stats) {
	f.mu.Lock()
	f.stats[p] = st
	f.mu.Unlock()
}

type fakeLabeler struct {
	labelled []string
	err      error // returned by Relabel when set
}

func (l *fakeLabeler) Enabled() bool { return true }
func (l *fakeLabeler) Relabel(_ context.Context, p string) error {
	if l.err != nil {
		return l.err
	}
	l.labelled = append(l.labelled, p)
	return nil
}

type harness struct {
	d       *Driver
	mounter *fakeMounter
	fs      *fakeFS
	labeler *fakeLabeler
	pools   map[string]string // name -> path, the volumes directory <dir>/<name>/csi
	dir     string
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
	if err := h.d.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// newUnopenedHarness is newHarness without OpenPools.
func newUnopenedHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{dir: dir, pools: map[string]string{"fast": filepath.Join(dir, "fast", "csi"), "slow": filepath.Join(dir, "slow", "csi")}}
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
	h.mounter = newFakeMounter()
	h.fs = &fakeFS{stats: map[string]capacity.Stats{}, devices: map[string]uint64{}, mounter: h.mounter}
	for _, p := range h.pools {
		h.fs.setStats(p, gib(1, 0.5))
	}
	h.labeler = &fakeLabeler{}
	cfg := Config{DriverName: contract.DriverName, NodeID: testNode, Pools: set, StatsCacheTTL: 60e9, StatsTimeout: 10e9}
	for _, m := range mutate {
		m(&cfg)
	}
	h.d, err = New(cfg, Deps{Mounter: h.mounter, Labeler: h.labeler, FS: h.fs})
	if err != nil {
		t.Fatal(err)
	}
	return h
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

// wantCode asserts the gRPC code and that the message contains every part.
func wantCode(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	if st.Code() != code {
		t.Fatalf("code = %s, want %s (message %q)", st.Code(), code, st.Message())
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Fatalf("message %q does not contain %q", st.Message(), p)
		}
	}
}
