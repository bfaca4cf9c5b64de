package handlers

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// BenchmarkEnforcedCreateDelete is make bench's figure for what enforcing
// sizes costs a create and a delete: the same pool, real dirvol on the
// test's disk, with and without enforceSize (the fake quota backend: on a
// real filesystem each step adds one quotactl or ioctl, microseconds).
func BenchmarkEnforcedCreateDelete(b *testing.B) {
	plain := newHarness(b)
	enforced := newQuotaHarness(b, prjquota.NewFake(), pool.IDRange{First: 1, Last: 1 << 20})
	ctx := context.Background()
	one := func(h *harness, i int) time.Duration {
		id := fmt.Sprintf("pvc-%d", i)
		start := time.Now()
		if _, err := h.d.CreateVolume(ctx, createReq(id, "fast", MiB)); err != nil {
			b.Fatal(err)
		}
		if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	// Interleaved, so both see the same disk and cache state.
	var p, e time.Duration
	for i := range b.N {
		p += one(plain, i)
		e += one(enforced, i)
	}
	b.ReportMetric(float64(p.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(e.Nanoseconds())/float64(b.N), "enforced-ns/op")
	b.ReportMetric(float64(e)/float64(p), "enforced/plain")
}

// BenchmarkStats100kFiles compares NodeGetVolumeStats of a volume holding
// 100,000 files from the quota accounting with the walk it replaces (the
// usage cache off, so every call walks): the walk is of the same tree in a
// directory without a project quota (adopted, as one the replaced driver
// made), whose stats come from a walk.
func BenchmarkStats100kFiles(b *testing.B) {
	fake := prjquota.NewFake()
	h := newQuotaHarness(b, fake, pool.IDRange{First: 1, Last: 10}, func(c *Config) { c.StatsCacheTTL = 0 })
	ctx := context.Background()
	if _, err := h.d.CreateVolume(ctx, createReq("pvc-files", "fast", 256*MiB)); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(h.pools["fast"], "pvc-files")
	adopted := filepath.Join(h.pools["fast"], "pvc-adopted")
	for _, d := range []string{dir, adopted} {
		testutil.Make100kFiles(b, d)
	}
	time1 := func(id, path string) time.Duration {
		start := time.Now()
		if _, err := h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: path}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	var quota, walk time.Duration
	for range b.N {
		quota += time1("pvc-files", dir)
	}
	for range b.N {
		walk += time1("pvc-adopted", adopted)
	}
	b.ReportMetric(float64(quota.Microseconds())/float64(b.N), "quota-µs/op")
	b.ReportMetric(float64(walk.Milliseconds())/float64(b.N), "walk-ms/op")
	b.ReportMetric(float64(walk)/float64(quota), "walk/quota")
}
