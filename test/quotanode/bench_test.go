package quotanode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// The enforced-size figures of `make bench-quota`, measured where project
// quotas are real (the quota VM): hpp-csi over its socket with two pools
// on one XFS mounted prjquota, "enforced" (enforceSize) and "plain", so
// both see the same filesystem, disk and cache. Under the VM's emulation
// every figure is slower than on hardware; the ratios are the result.

// benchDriver starts hpp-csi with the enforced and the plain pool, stats
// never cached (every NodeGetVolumeStats measures).
func benchDriver(tb testing.TB) *csitest.Client {
	tb.Helper()
	mnt := quotaFS(tb, "xfs")
	pools := []csitest.Pool{
		{Name: "enforced", Path: filepath.Join(mnt, "enforced"), EnforceSize: true, ProjectIDs: map[string]uint32{"first": firstID, "last": lastID}},
		{Name: "plain", Path: filepath.Join(mnt, "plain")},
	}
	for _, p := range pools {
		if err := os.MkdirAll(p.Path, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return launchDriver(tb, pools, "--stats-cache-ttl=0s").Client(tb)
}

// benchPublish publishes vol at a target of the test's and unpublishes it
// at the test's end; it returns the target.
func benchPublish(tb testing.TB, c *csitest.Client, vol *csi.Volume) string {
	tb.Helper()
	target := filepath.Join(tb.TempDir(), "target")
	if _, err := c.NodePublishVolume(csitest.Ctx(tb), csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext())); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = c.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: target})
	})
	return target
}

func benchCreate(ctx context.Context, c *csitest.Client, pool, id string, size int64) (*csi.Volume, error) {
	resp, err := c.CreateVolume(ctx, csitest.CreateRequest(id, nodeID, size, map[string]string{contract.ParamStoragePool: pool}))
	return resp.GetVolume(), err
}

// TestBenchPoolsEnforce guards the benchmarks below: in their setup the
// enforced pool's volume refuses a write past its size and the plain
// pool's does not, so the figures compare a real quota with none.
func TestBenchPoolsEnforce(t *testing.T) {
	c := benchDriver(t)
	ctx := csitest.Ctx(t)
	for pool, wantRefused := range map[string]bool{"enforced": true, "plain": false} {
		vol, err := benchCreate(ctx, c, pool, "pvc-guard-"+pool, 4*MiB)
		if err != nil {
			t.Fatal(err)
		}
		target := benchPublish(t, c, vol)
		written, err := testutil.WriteSynced(filepath.Join(target, "data"), 8*MiB)
		refused := errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.ENOSPC)
		if refused != wantRefused {
			t.Errorf("pool %s: 8 MiB into a 4 MiB volume: %d bytes written, err %v; want refused %v", pool, written, err, wantRefused)
		}
		t.Logf("pool %s: %d bytes of 8 MiB written into a 4 MiB volume (%v)", pool, written, err)
	}
}

// BenchmarkRealQuotaCreateDelete is what enforcing sizes costs a
// CreateVolume and a DeleteVolume (assigning, limiting and freeing a
// project ID), interleaved with the plain pool's.
func BenchmarkRealQuotaCreateDelete(b *testing.B) {
	c := benchDriver(b)
	ctx := context.Background()
	one := func(pool string, i int) time.Duration {
		id := fmt.Sprintf("pvc-%s-%d", pool, i)
		start := time.Now()
		if _, err := benchCreate(ctx, c, pool, id, MiB); err != nil {
			b.Fatal(err)
		}
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	var plain, enforced time.Duration
	for i := range b.N {
		plain += one("plain", i)
		enforced += one("enforced", i)
	}
	b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(enforced.Nanoseconds())/float64(b.N), "enforced-ns/op")
	b.ReportMetric(float64(enforced)/float64(plain), "enforced/plain")
}

// BenchmarkRealQuotaStats100kFiles compares NodeGetVolumeStats of a
// published volume holding 100,000 files, read from its project quota
// (enforced pool) and measured by a walk (plain pool).
func BenchmarkRealQuotaStats100kFiles(b *testing.B) {
	const statsRounds = 5
	c := benchDriver(b)
	ctx := context.Background()
	targets := map[string]string{}
	for _, pool := range []string{"enforced", "plain"} {
		vol, err := benchCreate(ctx, c, pool, "pvc-files-"+pool, 256*MiB)
		if err != nil {
			b.Fatal(err)
		}
		target := benchPublish(b, c, vol)
		testutil.Make100kFiles(b, target)
		targets[vol.GetVolumeId()] = target
	}
	stats := func(id string) time.Duration {
		start := time.Now()
		if _, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: targets[id]}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	var quota, walk time.Duration
	for range b.N {
		// make bench-quota runs this at 1x (its setup is minutes under
		// emulation): each iteration takes statsRounds samples of each.
		for range statsRounds {
			quota += stats("pvc-files-enforced")
			walk += stats("pvc-files-plain")
		}
	}
	n := float64(b.N * statsRounds)
	b.ReportMetric(float64(quota.Microseconds())/n, "quota-µs/op")
	b.ReportMetric(float64(walk.Milliseconds())/n, "walk-ms/op")
	b.ReportMetric(float64(walk)/float64(quota), "walk/quota")
}
