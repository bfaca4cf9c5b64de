package handlers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

const MiB = 1 << 20

// newQuotaHarness is newHarness with pool "fast" enforcing sizes over the
// fake quota backend (1 GiB, 512 MiB free).
func newQuotaHarness(t testing.TB, fake *prjquota.Fake, rng pool.IDRange, mutate ...func(*Config)) *harness {
	t.Helper()
	h := newUnopenedHarnessOver(t, fake, append([]func(*Config){enforcingFast(rng)}, mutate...)...)
	if err := h.rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestEnforcedCreateStatsExpandDelete(t *testing.T) {
	fake := prjquota.NewFake()
	h := newQuotaHarness(t, fake, pool.IDRange{First: 7, Last: 9})
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 100*MiB))
	dir := filepath.Join(h.pools["fast"], "pvc-1")
	id := fake.ProjectOf(dir)
	if id < 7 || id > 9 || fake.Limit(id) != 100*MiB {
		t.Fatalf("volume directory has project %d with limit %d; want one of 7-9 limited to %d", id, fake.Limit(id), 100*MiB)
	}
	if link, err := os.Readlink(filepath.Join(h.pools["fast"], prjquota.StateDir, "7")); err != nil || link != "pvc-1" {
		t.Fatalf("project 7's link = %q, %v; want pvc-1", link, err)
	}

	// Offered capacity counts the volume's full limit, not what it wrote.
	fake.SetUsage(id, 30*MiB, 12)
	if got := h.offered(t, "fast"); got != 512*MiB-70*MiB {
		t.Fatalf("GetCapacity offers %d bytes; want 512 MiB free less the 70 MiB the volume may still write", got)
	}

	// Stats from the quota accounting, no walk.
	stats, err := h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-1", VolumePath: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, i := stats.GetUsage()[0], stats.GetUsage()[1]
	if b.GetUsed() != 30*MiB || b.GetTotal() != 100*MiB || b.GetAvailable() != 70*MiB || i.GetUsed() != 12 {
		t.Fatalf("stats = %v; want 30 MiB used of 100 MiB, 12 inodes", stats)
	}
	if n := h.fs.Walks; n != 0 {
		t.Errorf("NodeGetVolumeStats walked the volume %d times; the quota accounting has the figures", n)
	}

	// The controller records and asks for the node step.
	exp, err := h.d.ControllerExpandVolume(ctx, expandReq("pvc-1", 300*MiB))
	if err != nil || exp.GetCapacityBytes() != 300*MiB || !exp.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume = %v, %v; want 300 MiB and a node step", exp, err)
	}
	if fake.Limit(id) != 100*MiB {
		t.Fatalf("the controller changed the limit to %d; the node raises it", fake.Limit(id))
	}
	nexp := &csi.NodeExpandVolumeRequest{VolumeId: "pvc-1", VolumePath: dir, CapacityRange: &csi.CapacityRange{RequiredBytes: 300 * MiB}}
	if r, err := h.d.NodeExpandVolume(ctx, nexp); err != nil || r.GetCapacityBytes() != 300*MiB || fake.Limit(id) != 300*MiB {
		t.Fatalf("NodeExpandVolume = %v, %v, limit %d; want 300 MiB", r, err, fake.Limit(id))
	}
	nexp.CapacityRange.RequiredBytes = 200 * MiB
	_, err = h.d.NodeExpandVolume(ctx, nexp)
	grpctest.WantCode(t, err, codes.OutOfRange, `volume "pvc-1" is 314572800 bytes; shrinking it to 209715200 bytes is refused (volumes only grow)`)
	nexp.CapacityRange.RequiredBytes = 900 * MiB
	_, err = h.d.NodeExpandVolume(ctx, nexp)
	grpctest.WantCode(t, err, codes.ResourceExhausted, `storage pool "fast" on node node-a can offer`, "less than the 629145600 bytes this expansion adds")
	if fake.Limit(id) != 300*MiB || recordedCapacity(t, h.pools["fast"], "pvc-1") != 300*MiB {
		t.Fatalf("a refused expansion changed the volume: limit %d", fake.Limit(id))
	}

	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(h.pools["fast"], prjquota.StateDir, "7")); !os.IsNotExist(err) || fake.Limit(id) != 0 {
		t.Fatalf("after delete: link %v, limit %d; want both gone", err, fake.Limit(id))
	}
}

func TestEnforcedCloneGetsItsOwnID(t *testing.T) {
	fake := prjquota.NewFake()
	h := newQuotaHarness(t, fake, pool.IDRange{First: 1, Last: 10})
	h.mustCreate(t, createReq("pvc-src", "fast", 10*MiB))
	writeFile(t, filepath.Join(h.pools["fast"], "pvc-src", "f"), "data")
	clone := createReq("pvc-copy", "fast", 20*MiB)
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "pvc-src"}}}
	h.mustCreate(t, clone)
	src, cp := fake.ProjectOf(filepath.Join(h.pools["fast"], "pvc-src")), fake.ProjectOf(filepath.Join(h.pools["fast"], "pvc-copy"))
	if src == 0 || cp == 0 || src == cp || fake.Limit(cp) != 20*MiB {
		t.Fatalf("source project %d, clone project %d (limit %d); want two IDs, the clone's limited to 20 MiB", src, cp, fake.Limit(cp))
	}
}

func TestEnforcingPoolRefusals(t *testing.T) {
	fake := prjquota.NewFake()
	h := newQuotaHarness(t, fake, pool.IDRange{First: 1, Last: 1})
	ctx := context.Background()
	_, err := h.d.CreateVolume(ctx, createReq("pvc-0", "fast", 0))
	grpctest.WantCode(t, err, codes.InvalidArgument, `storage pool "fast" enforces volume sizes (enforceSize): capacity_range: required_bytes or limit_bytes must be set`)
	h.mustCreate(t, createReq("pvc-1", "fast", MiB))
	_, err = h.d.CreateVolume(ctx, createReq("pvc-2", "fast", MiB))
	grpctest.WantCode(t, err, codes.ResourceExhausted, "all 1 project IDs of the pool's range 1-1 are held or in use on the filesystem; widen projectIDs in --datadir")
	if _, err := os.Stat(filepath.Join(h.pools["fast"], "pvc-2")); !os.IsNotExist(err) {
		t.Fatalf("a refused create left its directory: %v", err)
	}
}

func TestEnforcingPoolNotReadyOnPlainFilesystem(t *testing.T) {
	fake := prjquota.NewFake()
	fake.SetProbe(prjquota.Probe{FSType: "xfs"})
	h := newUnopenedHarnessOver(t, fake, enforcingFast(pool.IDRange{}))
	err := h.rt.OpenPools(context.Background())
	want := `storage pool "fast" is not ready: enforceSize: ` + h.pools["fast"] + ` is XFS without project quotas enforced; mount it with the prjquota option`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenPools = %v\nwant it to say %q", err, want)
	}
	_, err = h.d.CreateVolume(context.Background(), createReq("pvc-1", "fast", MiB))
	grpctest.WantCode(t, err, codes.Unavailable, "mount it with the prjquota option")
	if _, err := h.d.CreateVolume(context.Background(), createReq("pvc-1", "slow", MiB)); err != nil {
		t.Fatalf("the pool that does not enforce is still usable: %v", err)
	}
}

// A directory the replaced driver made has no project quota: its health
// says so, and an expansion gives it one over everything it holds.
func TestAdoptedVolumeUnenforcedUntilExpanded(t *testing.T) {
	fake := prjquota.NewFake()
	h := newQuotaHarness(t, fake, pool.IDRange{First: 1, Last: 10})
	ctx := context.Background()
	dir := filepath.Join(h.pools["fast"], "pvc-old")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "disk.img"), "vm")
	health, err := h.d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-old"})
	if err != nil {
		t.Fatal(err)
	}
	if e := health.GetVolumeHealth().GetHealthStatuses(); len(e) != 1 || e[0].GetReason() != pools.ReasonSizeNotEnforced ||
		e[0].GetMessage() != `volume "pvc-old" in storage pool "fast" has no size limit: it was made before the pool enforced sizes (or by the replaced driver); expanding it (any new size) gives it a project quota` {
		t.Fatalf("health = %v", health)
	}
	if _, err := h.d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "pvc-old", VolumePath: dir, CapacityRange: &csi.CapacityRange{RequiredBytes: 50 * MiB}}); err != nil {
		t.Fatal(err)
	}
	id := fake.ProjectOf(dir)
	if id == 0 || fake.ProjectOf(filepath.Join(dir, "disk.img")) != id || fake.Limit(id) != 50*MiB {
		t.Fatalf("after expansion: directory project %d, file project %d, limit %d; want one ID on both, 50 MiB", id, fake.ProjectOf(filepath.Join(dir, "disk.img")), fake.Limit(id))
	}
	health, _ = h.d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-old"})
	if len(health.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Fatalf("health after adoption = %v, want none", health)
	}
}

// A restart finds the IDs where they were: the ledger is on disk.
func TestEnforcedIDsSurviveRestart(t *testing.T) {
	fake := prjquota.NewFake()
	h := newQuotaHarness(t, fake, pool.IDRange{First: 1, Last: 10})
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 10*MiB))
	id := fake.ProjectOf(filepath.Join(h.pools["fast"], "pvc-1"))
	d2, rt2 := h.newDriver(t)
	if err := rt2.OpenPools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.CreateVolume(ctx, createReq("pvc-2", "fast", 10*MiB)); err != nil {
		t.Fatal(err)
	}
	if got := fake.ProjectOf(filepath.Join(h.pools["fast"], "pvc-2")); got == id || got == 0 {
		t.Fatalf("after a restart the new volume got project %d, the first one holds %d", got, id)
	}
}
