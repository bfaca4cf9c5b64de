package handlers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// withLegacy gives the named harness pools a legacyPath: the host pool
// directory <dir>/<name>, whose csi/ subdirectory is the pool's path (the
// layout of a pathConfig CR).
func withLegacy(names ...string) func(*Config) {
	return withLegacyPath(func(p pool.Pool) string { return filepath.Dir(p.Path) }, names...)
}

// withSeparateLegacy gives pool name the legacyPath <dir>/old-pvs, beside
// the host pool directories rather than above the pool's path.
func withSeparateLegacy(name string) func(*Config) {
	return withLegacyPath(func(p pool.Pool) string { return filepath.Join(filepath.Dir(filepath.Dir(p.Path)), "old-pvs") }, name)
}

func withLegacyPath(legacyPath func(pool.Pool) string, names ...string) func(*Config) {
	return func(c *Config) {
		editPools(c, func(p *pool.Pool) {
			if slices.Contains(names, p.Name) {
				p.LegacyPath = legacyPath(*p)
			}
		})
	}
}

// legacyDir makes a legacy volume directory with one file, as hpp-legacy
// or KubeVirt's provisioner left it.
func (h *harness) legacyDir(t *testing.T, poolName, id string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(h.pools[poolName]), id)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func legacyCtx(poolName string) map[string]string {
	return map[string]string{contract.ParamStoragePool: poolName, contract.VolumeContextLayout: contract.LayoutLegacy}
}

func legacyPublishReq(id, target, poolName string, mode csi.VolumeCapability_AccessMode_Mode) *csi.NodePublishVolumeRequest {
	req := publishReq(id, target)
	req.VolumeContext = legacyCtx(poolName)
	req.VolumeCapability.AccessMode.Mode = mode
	return req
}

func TestLegacyPublish(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, withLegacy("fast"))
	src := h.legacyDir(t, "fast", "pvc-old")
	target := filepath.Join(h.dir, "pods", "a", "mount")

	// ReadWriteMany carried over from the legacy PV is accepted: the PV is
	// pinned to this node.
	if _, err := h.d.NodePublishVolume(ctx, legacyPublishReq("pvc-old", target, "fast", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)); err != nil {
		t.Fatal(err)
	}
	if h.mounter.Mounts[target] != src {
		t.Fatalf("mounts %v, want %s at %s", h.mounter.Mounts, src, target)
	}
	if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-old", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "data")); err != nil {
		t.Fatalf("unpublish touched the legacy volume: %v", err)
	}

	other := filepath.Join(h.dir, "outside")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(h.dir, "fast", "pvc-link")); err != nil {
		t.Fatal(err)
	}
	rwo := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, tc := range []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		code codes.Code
		msg  string
	}{
		{"missing directory is never created", legacyPublishReq("pvc-gone", target, "fast", rwo), codes.NotFound,
			`volume "pvc-gone" does not exist in the legacy directory ` + filepath.Join(h.dir, "fast") + ` of storage pool "fast" on node node-a (hpp-csi never creates legacy volumes: is their disk mounted?)`},
		{"symbolic link out", legacyPublishReq("pvc-link", target, "fast", rwo), codes.InvalidArgument,
			`volume id: "pvc-link" is a symbolic link that resolves outside the pool`},
		{"pool without legacyPath", legacyPublishReq("pvc-old", target, "slow", rwo), codes.FailedPrecondition,
			`storage pool "slow" on node node-a has no legacyPath, so it cannot serve migrated legacy volumes: set "legacyPath" in --datadir to the legacy provisioner's PV_DIR`},
		{"unknown pool", legacyPublishReq("pvc-old", target, "nope", rwo), codes.FailedPrecondition,
			`volume_context: ` + contract.ParamStoragePool + ` "nope" is not a storage pool on node node-a; available pools: "fast", "slow"`},
		{"no pool", func() *csi.NodePublishVolumeRequest {
			r := legacyPublishReq("pvc-old", target, "", rwo)
			delete(r.VolumeContext, contract.ParamStoragePool)
			return r
		}(), codes.InvalidArgument, `volume_context: ` + contract.ParamStoragePool + ` is required with ` + contract.VolumeContextLayout + `=legacy`},
		{"unknown layout", func() *csi.NodePublishVolumeRequest {
			r := legacyPublishReq("pvc-old", target, "fast", rwo)
			r.VolumeContext[contract.VolumeContextLayout] = "flat"
			return r
		}(), codes.InvalidArgument, `volume_context: ` + contract.VolumeContextLayout + ` "flat" is not a layout hpp-csi knows; the only one is "legacy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.d.NodePublishVolume(ctx, tc.req)
			grpctest.WantCode(t, err, tc.code, tc.msg)
			if _, err := os.Lstat(filepath.Join(h.dir, "fast", "pvc-gone")); !os.IsNotExist(err) {
				t.Fatalf("publish created a legacy directory: %v", err)
			}
		})
	}

	// Without the layout the PV names a volume of the pool's own directory.
	_, err := h.d.NodePublishVolume(ctx, publishReq("pvc-old", target))
	grpctest.WantCode(t, err, codes.NotFound, `volume "pvc-old" does not exist on node node-a`)

	// A volume hpp-csi made keeps refusing multi-node modes.
	h.mustCreate(t, createReq("pvc-new", "fast", 1))
	req := publishReq("pvc-new", target)
	req.VolumeCapability.AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	_, err = h.d.NodePublishVolume(ctx, req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "access mode MULTI_NODE_MULTI_WRITER is not supported")
}

func TestLegacyStatsAndDelete(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, withLegacy("fast", "slow"))
	legacy := filepath.Join(h.dir, "fast")
	src := h.legacyDir(t, "fast", "pvc-old")
	h.fs.SetStats(legacy, gib(1, 0.25))
	// hpp-legacy's create in flight in the same directory: hpp-csi must
	// leave it alone.
	staged := filepath.Join(legacy, dirvol.StagingDir, "local.in-flight")
	if err := os.MkdirAll(staged, 0o700); err != nil {
		t.Fatal(err)
	}

	stats, err := h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-old", VolumePath: src})
	if err != nil {
		t.Fatal(err)
	}
	bytes := stats.GetUsage()[0]
	if bytes.GetUsed() < 64<<10 || bytes.GetAvailable() != 256<<20 {
		t.Fatalf("usage %+v: want at least 64 KiB used and the legacy filesystem's 256 MiB available", bytes)
	}

	health, err := h.d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-old"})
	if err != nil || len(health.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Fatalf("health %v, %v; want healthy", health, err)
	}

	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(src); !os.IsNotExist(err) {
		t.Fatalf("legacy directory still there after DeleteVolume: %v", err)
	}
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-old"}); err != nil {
		t.Fatalf("repeated DeleteVolume: %v", err)
	}
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("hpp-legacy's staging entry was touched: %v", err)
	}
	for _, n := range []string{"fast", "slow"} {
		if _, err := os.Stat(h.pools[n]); err != nil {
			t.Fatalf("pool %s after deleting a legacy volume: %v", n, err)
		}
	}
	// Nothing that holds configured storage is ever taken for a legacy
	// volume: "csi" is refused as an id, and it is the pool.
	_, err = h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "csi"})
	grpctest.WantCode(t, err, codes.InvalidArgument, `"csi" is reserved`)
}

func TestLegacyAmbiguousRefused(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, withLegacy("fast", "slow"))
	a, b := h.legacyDir(t, "fast", "pvc-twice"), h.legacyDir(t, "slow", "pvc-twice")
	want := `volume "pvc-twice" exists in more than one legacy directory on node node-a (` + a + `, ` + b +
		`); hpp-csi does not guess which one the PV means: move the stray copy out of the legacy directories`

	_, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-twice"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, want)
	_, err = h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-twice", VolumePath: a})
	grpctest.WantCode(t, err, codes.FailedPrecondition, want)
	_, err = h.d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: "pvc-twice"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, want)
	for _, d := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(d, "data")); err != nil {
			t.Fatalf("an ambiguous volume was touched: %v", err)
		}
	}
	// The PV's attributes name the pool, so publishing needs no guess.
	target := filepath.Join(h.dir, "pods", "a", "mount")
	if _, err := h.d.NodePublishVolume(ctx, legacyPublishReq("pvc-twice", target, "slow", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)); err != nil {
		t.Fatal(err)
	}
	if h.mounter.Mounts[target] != b {
		t.Fatalf("published %s, want %s", h.mounter.Mounts[target], b)
	}
	// Unpublish never looks at legacy directories (only own ephemeral
	// volumes die with their pod), so the ambiguity does not wedge it.
	if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-twice", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
}

func TestLegacyDirectoryMissingOrLost(t *testing.T) {
	ctx := context.Background()
	h := newUnopenedHarness(t, withSeparateLegacy("fast"))
	legacy := filepath.Join(h.dir, "old-pvs")
	err := h.rt.OpenPools(ctx)
	if err == nil || !strings.Contains(err.Error(), `storage pool "fast" is not ready: legacy directory `+legacy+` does not exist (is the disk of the legacy volumes mounted?); hpp-csi never creates it`) {
		t.Fatalf("OpenPools: %v", err)
	}
	if _, err := os.Lstat(legacy); !os.IsNotExist(err) {
		t.Fatalf("opening created the legacy directory: %v", err)
	}
	// Not found anywhere readable, but the legacy directory cannot be
	// read: Unavailable, so csi-provisioner retries instead of dropping
	// the PV as deleted.
	_, err = h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-old"})
	grpctest.WantCode(t, err, codes.Unavailable, "legacy directory "+legacy+" does not exist")

	if err := os.Mkdir(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.OpenPools(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(legacy, "pvc-old"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.fs.Devices[legacy] = 4242 // its mount went away under it
	health, err := h.d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-old"})
	if err != nil {
		t.Fatal(err)
	}
	if st := health.GetVolumeHealth().GetHealthStatuses(); len(st) != 1 || st[0].GetReason() != pools.ReasonLegacyMountLost ||
		st[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE {
		t.Fatalf("health of a legacy volume whose mount went away: %v", st)
	}
	storage, err := h.d.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range storage.GetBackendHealth() {
		found = found || b.GetReason() == pools.ReasonLegacyMountLost && b.GetStatus() == csi.StorageHealthErrorType_STORAGE_UNREACHABLE
	}
	if !found {
		t.Fatalf("NodeGetStorageHealth = %v, want %s", storage.GetBackendHealth(), pools.ReasonLegacyMountLost)
	}
}

// Legacy volumes share the pool's filesystem (legacyPath is the pool
// path's parent), so what hpp-legacy recorded they requested counts
// against the pool's offered capacity like the pool's own volumes.
func TestLegacyCapacity(t *testing.T) {
	ctx := context.Background()
	h := newUnopenedHarness(t, withLegacy("fast"), func(c *Config) { c.ReservationAware = true })
	owner, err := dirvol.Open(filepath.Join(h.dir, "fast"), dirvol.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := owner.Create(ctx, "pvc-old", dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, CapacityBytes: 100 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.OpenPools(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.offered(t, "fast"); got != 412<<20 {
		t.Fatalf("available = %d MiB, want 512 free - 100 requested by the legacy volume", got>>20)
	}
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-old"}); err != nil {
		t.Fatal(err)
	}
	if got := h.offered(t, "fast"); got != 512<<20 {
		t.Fatalf("available after deleting it = %d MiB, want 512 MiB", got>>20)
	}
}
