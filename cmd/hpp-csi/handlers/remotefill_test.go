package handlers

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

// startClones asks for n clones of pvc-src at once (pvc-c0, pvc-c1, ...)
// until each is answered "pending" (it copies), and returns their
// requests. A request may first be answered that the source is busy: each
// start looks for the source on this node under the source's lock, and
// the CO retries such an answer as it does here.
func startClones(t *testing.T, h *harness, n int) []*csi.CreateVolumeRequest {
	t.Helper()
	reqs := make([]*csi.CreateVolumeRequest, n)
	for i := range reqs {
		reqs[i] = remoteCloneReq(fmt.Sprintf("pvc-c%d", i), "pvc-src")
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
				_, errs[i] = h.call(req)
				if !strings.Contains(fmt.Sprint(errs[i]), `an operation on volume "pvc-src" is already in progress`) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		grpctest.WantCode(t, err, codes.Aborted, fmt.Sprintf("volume %q", reqs[i].Name), "operation pending")
	}
	return reqs
}

var waitingFor = regexp.MustCompile(`waiting for volume "(pvc-c\d+)"'s copy of volume:pvc-src to fill this node's clone cache`)

// filling retries every request until all but one answer that they wait
// for another's cache fill, and returns the one they name.
func filling(t *testing.T, h *harness, reqs []*csi.CreateVolumeRequest) string {
	t.Helper()
	var last []string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		named, waiting := map[string]bool{}, 0
		last = last[:0]
		for _, req := range reqs {
			_, err := h.call(req)
			if m := waitingFor.FindStringSubmatch(fmt.Sprint(err)); m != nil {
				named[m[1]] = true
				waiting++
			}
			last = append(last, fmt.Sprint(err))
		}
		if waiting == len(reqs)-1 && len(named) == 1 {
			for v := range named {
				return v
			}
		}
	}
	t.Fatalf("not all but one clone wait for one cache fill; the answers:\n%s", strings.Join(last, "\n"))
	return ""
}

// fill is n clones of a cacheable source started together, all but the
// filler waiting for its fetch, which is held until gate is closed.
type fill struct {
	src    string
	f      *fakeRemote
	h      *harness
	reqs   []*csi.CreateVolumeRequest
	filler string
	gate   chan struct{}
}

func startFill(t *testing.T, n int) fill {
	t.Helper()
	fl := fill{src: remoteTree(t), gate: make(chan struct{})}
	fl.f = &fakeRemote{dir: fl.src, node: remoteNode, generation: "g1", gate: fl.gate}
	fl.h = newRemoteHarness(t, fl.f)
	fl.reqs = startClones(t, fl.h, n)
	fl.filler = filling(t, fl.h, fl.reqs)
	return fl
}

// Clones of one source started together fetch it once: the others wait
// for that fetch to fill the clone cache, then are answered "not
// modified" (nothing sent) and copy from the cache.
func TestConcurrentClonesFetchTheSourceOnce(t *testing.T) {
	const n = 6
	fl := startFill(t, n)
	src, f, h, reqs, filler, gate := fl.src, fl.f, fl.h, fl.reqs, fl.filler, fl.gate
	if s, all := f.streams.Load(), f.fetches.Load(); s != 1 || all != 1 {
		t.Fatalf("%d streams and %d fetches while %s fills the cache; want 1 and 1", s, all, filler)
	}
	close(gate)
	for _, req := range reqs {
		if _, err := h.until(t, req); err != nil {
			t.Fatal(err)
		}
		sameTree(t, src, filepath.Join(h.pools["fast"], req.Name))
	}
	if s, nm := f.streams.Load(), f.notModified.Load(); s != 1 || nm != n-1 {
		t.Fatalf("%d streams and %d not-modified answers for %d clones; want 1 and %d", s, nm, n, n-1)
	}
	metrics := gather(t, h)
	for _, want := range []string{
		fmt.Sprintf(`hpp_pool_clone_cache_hits_total{pool="fast"} %d`, n-1),
		`hpp_pool_clone_cache_misses_total{pool="fast"} 1`,
		fmt.Sprintf(`hpp_pool_remote_copies_total{pool="fast",result="succeeded"} %d`, n),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("staging holds %v", s)
	}
}

// The fill deleted (canceled) while others wait: one of them fetches
// next, the rest wait for it, and every remaining clone completes.
func TestCanceledCacheFillHandsOverToOneWaiter(t *testing.T) {
	const n = 4
	fl := startFill(t, n)
	src, f, h, reqs, filler, gate := fl.src, fl.f, fl.h, fl.reqs, fl.filler, fl.gate
	f.set(func(f *fakeRemote) { f.gate = nil }) // the next fill streams freely
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: filler}); err != nil {
		t.Fatal(err)
	}
	close(gate)
	for _, req := range reqs {
		if req.Name == filler {
			continue
		}
		if _, err := h.until(t, req); err != nil {
			t.Fatal(err)
		}
		sameTree(t, src, filepath.Join(h.pools["fast"], req.Name))
	}
	if s, nm, c := f.streams.Load(), f.notModified.Load(), f.canceled.Load(); s != 2 || nm != n-2 || c != 1 {
		t.Fatalf("%d streams (%d canceled) and %d not-modified answers; want 2 (1) and %d", s, c, nm, n-2)
	}
	if _, err := h.rt.Find(ctx, filler); err == nil {
		t.Fatalf("the deleted clone %s exists", filler)
	}
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("staging holds %v", s)
	}
	assertCacheStagingEmpty(t, h.pools["fast"])
}

// A source that cannot be cached (no generation) is fetched by every
// clone, at once: waiting for each other would gain nothing.
func TestUncacheableSourceIsFetchedByEachClone(t *testing.T) {
	const n = 3
	src := remoteTree(t)
	gate := make(chan struct{})
	f := &fakeRemote{dir: src, node: remoteNode, gate: gate}
	h := newRemoteHarness(t, f)
	reqs := startClones(t, h, n)
	// All of them stream while the first is still held.
	for end := time.Now().Add(10 * time.Second); f.streams.Load() < n && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if s := f.streams.Load(); s != n {
		t.Fatalf("%d of %d clones of an uncacheable source stream at once", s, n)
	}
	close(gate)
	for _, req := range reqs {
		if _, err := h.until(t, req); err != nil {
			t.Fatal(err)
		}
		sameTree(t, src, filepath.Join(h.pools["fast"], req.Name))
	}
	if s := f.streams.Load(); s != n {
		t.Fatalf("%d streams for %d clones of an uncacheable source, want %d", s, n, n)
	}
}

// assertCacheStagingEmpty: no half-built cache entry is left in the pool.
func assertCacheStagingEmpty(t *testing.T, poolDir string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(poolDir, clonecache.Dir, clonecache.StagingDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the clone cache's staging holds %v", left)
	}
}
