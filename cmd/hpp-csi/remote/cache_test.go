package remote

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools/poolstest"
	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// receivingNode is node-b: a pool runtime whose RemoteSources is the real
// Fetcher, with its metrics in reg.
type receivingNode struct {
	rt  *pools.Runtime
	reg *prometheus.Registry
	p   pool.Pool
	fs  *poolstest.FS
}

func startReceivingNode(t *testing.T, ca *testutil.TestCA, port string, cacheBytes int64) *receivingNode {
	t.Helper()
	p := pool.Pool{Name: "b", Path: filepath.Join(t.TempDir(), "b", "csi"), CacheBytes: cacheBytes}
	reg := prometheus.NewRegistry()
	rt, fsys := openNodeRuntime(t, "node-b", p, pools.Deps{Remote: fetcherOnB(t, ca, port), Metrics: reg})
	return &receivingNode{rt: rt, reg: reg, p: p, fs: fsys}
}

// create makes volume id from src for the claim, asked again (as
// csi-provisioner does) until the copy is done.
func (b *receivingNode) create(t *testing.T, id string, src pools.Source, claim string) pools.Volume {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		vol, err := func() (pools.Volume, error) {
			release, err := b.rt.Lock(id)
			if err != nil {
				return pools.Volume{}, err
			}
			defer release()
			return b.rt.Create(ctx, pools.Creation{Pool: "b", ID: id, What: "volume",
				Spec: dirvol.Spec{CapacityBytes: 64 << 20}, Source: &src,
				Claim:  pools.ClaimRef{Namespace: ns, Name: claim},
				Accept: func(dirvol.Volume) error { return nil }})
		}()
		if err == nil {
			return vol
		}
		if pools.KindOf(err) != pools.Busy || time.Now().After(deadline) {
			t.Fatalf("Create %s from %+v: %v (kind %v)", id, src, err, pools.KindOf(err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric is the value of the pool "b" sample of a counter or gauge.
func (b *receivingNode) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && l.GetValue() == "b" {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func (b *receivingNode) received(t *testing.T) float64 {
	return b.metric(t, "hpp_pool_remote_copy_received_bytes_total")
}

// The benchmark's case, and the cache's freshness: the first clone of
// node-a's volume fetches it; later clones of the unchanged source send
// nothing and equal it; once the source is published read-write it is
// never served from cache while published, and after that the next clone
// fetches again.
func TestCloneCacheAcrossNodes(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	b := startReceivingNode(t, ca, a.port, 0)
	src := pools.Source{ID: "pvc-src"}

	v1 := b.create(t, "pvc-c1", src, "clone")
	compareTrees(t, a.vol.Path, v1.Path)
	first := b.received(t)
	if first <= 0 {
		t.Fatalf("first clone: %v bytes received, want the source", first)
	}
	if misses := b.metric(t, "hpp_pool_clone_cache_misses_total"); misses != 1 {
		t.Errorf("misses after the first clone: %v, want 1", misses)
	}
	if n := b.metric(t, "hpp_pool_clone_cache_bytes"); n <= 0 {
		t.Errorf("cache bytes after the first clone: %v, want the source's size", n)
	}

	for i, id := range []string{"pvc-c2", "pvc-c3", "pvc-c4"} {
		v := b.create(t, id, src, "clone")
		compareTrees(t, a.vol.Path, v.Path)
		if got := b.received(t); got != first {
			t.Fatalf("clone %d of the unchanged source: %v bytes received in all, want still %v (nothing sent)", i+2, got, first)
		}
	}
	if hits := b.metric(t, "hpp_pool_clone_cache_hits_total"); hits != 3 {
		t.Errorf("hits: %v, want 3", hits)
	}

	// A read-write publish of the source on node-a: live while published.
	ctx := context.Background()
	srcVol, err := a.rt.Find(ctx, "pvc-src")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "pod", "mount")
	if err := a.rt.Publish(srcVol, pools.Publication{Target: target}); err != nil {
		t.Fatal(err)
	}
	if gen, err := a.rt.SourceGeneration(ctx, src); err != nil || gen != pools.GenerationLive {
		t.Fatalf("generation of a published volume: %q, %v; want %q", gen, err, pools.GenerationLive)
	}
	before := b.received(t)
	v := b.create(t, "pvc-live", src, "clone")
	compareTrees(t, a.vol.Path, v.Path)
	if got := b.received(t); got <= before {
		t.Fatalf("clone of a source published read-write: %v bytes received in all, want more than %v (fetched, not cached)", got, before)
	}
	if err := a.rt.Unpublish(target); err != nil {
		t.Fatal(err)
	}
	// Unpublished, the source has a new generation: the cached copy is
	// stale, the next clone fetches and caches again, the one after hits.
	before = b.received(t)
	v = b.create(t, "pvc-after", src, "clone")
	compareTrees(t, a.vol.Path, v.Path)
	if got := b.received(t); got <= before {
		t.Fatalf("first clone after a read-write publish: %v bytes received in all, want more than %v", got, before)
	}
	before = b.received(t)
	v = b.create(t, "pvc-after2", src, "clone")
	compareTrees(t, a.vol.Path, v.Path)
	if got := b.received(t); got != before {
		t.Fatalf("second clone after a read-write publish: %v bytes received in all, want still %v", got, before)
	}
	if hits := b.metric(t, "hpp_pool_clone_cache_hits_total"); hits != 4 {
		t.Errorf("hits: %v, want 4", hits)
	}
	// One entry per source: the stale one was replaced.
	entries := cacheEntries(t, b)
	if len(entries) != 1 {
		t.Errorf("cache entries: %v, want one", entries)
	}
}

// A snapshot never changes: restoring it twice fetches it once.
func TestCloneCacheSnapshot(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	b := startReceivingNode(t, ca, a.port, 0)
	src := pools.Source{Snapshot: true, ID: "snap-1"}
	v := b.create(t, "pvc-r1", src, "restore")
	compareTrees(t, a.snap, v.Path)
	first := b.received(t)
	if first <= 0 {
		t.Fatalf("first restore: %v bytes received", first)
	}
	v = b.create(t, "pvc-r2", src, "restore")
	compareTrees(t, a.snap, v.Path)
	if got := b.received(t); got != first {
		t.Fatalf("second restore: %v bytes received in all, want still %v", got, first)
	}
	if hits := b.metric(t, "hpp_pool_clone_cache_hits_total"); hits != 1 {
		t.Errorf("hits: %v, want 1", hits)
	}
}

// A limit smaller than the source: nothing is cached, every clone fetches,
// and the clones are still right.
func TestCloneCacheTooSmall(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	b := startReceivingNode(t, ca, a.port, 4096)
	src := pools.Source{ID: "pvc-src"}
	compareTrees(t, a.vol.Path, b.create(t, "pvc-c1", src, "clone").Path)
	first := b.received(t)
	compareTrees(t, a.vol.Path, b.create(t, "pvc-c2", src, "clone").Path)
	// The second stream is the source again (give or take a byte: the
	// stream carries times, and reading the source may have moved its atime).
	if got := b.received(t) - first; got < first*9/10 {
		t.Fatalf("second clone with a cache too small: %v bytes received, want the source again (%v)", got, first)
	}
	if n := len(cacheEntries(t, b)); n != 0 {
		t.Errorf("%d cache entries, want none", n)
	}
}

// A create that does not fit first evicts the cache: its bytes are on the
// pool's disk, counted as used, and given back before a create is refused.
func TestCloneCacheEvictedForRoom(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	b := startReceivingNode(t, ca, a.port, 0)
	b.create(t, "pvc-c1", pools.Source{ID: "pvc-src"}, "clone")
	if n := len(cacheEntries(t, b)); n != 1 {
		t.Fatalf("%d cache entries after a clone, want 1", n)
	}
	// The pool's filesystem has 1 MiB left (statfs answers so whatever
	// is freed: the create is refused after all, but only after the
	// cache was emptied).
	b.fs.SetStats(b.p.Path, capacity.Stats{TotalBytes: 1 << 30, AvailableBytes: 1 << 20, UsedBytes: 1<<30 - 1<<20})
	release, err := b.rt.Lock("pvc-plain")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.rt.Create(context.Background(), pools.Creation{Pool: "b", ID: "pvc-plain", What: "volume",
		Spec: dirvol.Spec{CapacityBytes: 64 << 20}, Accept: func(dirvol.Volume) error { return nil }})
	release()
	if pools.KindOf(err) != pools.NoRoom {
		t.Fatalf("create that does not fit: %v, want NoRoom", err)
	}
	if n := len(cacheEntries(t, b)); n != 0 {
		t.Errorf("%d cache entries after a create short of room, want none", n)
	}
	if ev := b.metric(t, "hpp_pool_clone_cache_evictions_total"); ev != 1 {
		t.Errorf("evictions: %v, want 1", ev)
	}
	if n := b.metric(t, "hpp_pool_clone_cache_bytes"); n != 0 {
		t.Errorf("cache bytes: %v, want 0", n)
	}
}

// The transport passes generations through as they are: both layers
// must spell "may be changing now" alike.
func TestGenerationLiveAgrees(t *testing.T) {
	if peer.GenerationLive != pools.GenerationLive {
		t.Fatalf("peer.GenerationLive %q, pools.GenerationLive %q", peer.GenerationLive, pools.GenerationLive)
	}
}

// cacheEntries lists node-b's cache as a restart would find it.
func cacheEntries(t *testing.T, b *receivingNode) []clonecache.Record {
	t.Helper()
	c, _, err := clonecache.Open(filepath.Join(b.p.Path, clonecache.Dir), treecopy.Copy, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return c.Entries()
}
