package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

const remoteNode = "node-b"

// newRemoteHarness is a harness whose runtime can fetch from node-b.
func newRemoteHarness(t *testing.T, f *fakeRemote, mutate ...func(*Config)) *harness {
	t.Helper()
	h := newUnopenedHarness(t, mutate...)
	h.remote = f
	h.d, h.rt = h.newDriver(t)
	if err := h.rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

func remoteCloneReq(name, source string) *csi.CreateVolumeRequest {
	req := createReq(name, "fast", 128<<20)
	req.Parameters[paramPVCNamespace], req.Parameters[paramPVCName] = "ns", "claim-"+name
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: source}}}
	return req
}

// call is one CreateVolume with a short deadline, as csi-provisioner's.
func (h *harness) call(req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return h.d.CreateVolume(ctx, req)
}

// until retries req until its answer is not Aborted, or fails the test.
func (h *harness) until(t *testing.T, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		resp, err := h.call(req)
		if err == nil || !strings.Contains(err.Error(), "operation pending") {
			return resp, err
		}
	}
	t.Fatal("the copy did not end")
	return nil, nil
}

// stagedCreates lists the pool's staged (unpublished) volumes.
func (h *harness) stagedCreates(t *testing.T, poolName string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(h.pools[poolName], dirvol.StagingDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".create-") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestRemoteCloneCopiesTheTree(t *testing.T) {
	src := remoteTree(t)
	f := &fakeRemote{dir: src, node: remoteNode}
	h := newRemoteHarness(t, f)
	req := remoteCloneReq("pvc-copy", "pvc-src")
	resp, err := h.until(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVolume().GetContentSource().GetVolume().GetVolumeId() != "pvc-src" {
		t.Fatalf("response content source %v", resp.GetVolume().GetContentSource())
	}
	sameTree(t, src, filepath.Join(h.pools["fast"], "pvc-copy"))
	if got := f.claims[0]; got != (pools.ClaimRef{Namespace: "ns", Name: "claim-pvc-copy"}) {
		t.Fatalf("claim %+v", got)
	}
	// A retry is the volume; the same name from another source is not.
	if _, err := h.call(req); err != nil {
		t.Fatal(err)
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	other := remoteCloneReq("pvc-copy", "pvc-other")
	_, err = h.call(other)
	grpctest.WantCode(t, err, codes.AlreadyExists, `content source "volume:pvc-src", not "volume:pvc-other"`)
	if len(h.stagedCreates(t, "fast")) != 0 {
		t.Fatal("staging not empty")
	}
	metrics := gather(t, h)
	for _, want := range []string{`hpp_pool_remote_copies_total{pool="fast",result="succeeded"} 1`, `hpp_pool_remote_copy_received_bytes_total{pool="fast"}`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

func TestRemoteRestoreFromSnapshot(t *testing.T) {
	src := remoteTree(t)
	f := &fakeRemote{dir: src, node: remoteNode}
	h := newRemoteHarness(t, f)
	req := remoteCloneReq("pvc-restored", "")
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}}
	if _, err := h.until(t, req); err != nil {
		t.Fatal(err)
	}
	if got := f.sources[0]; got != (pools.Source{Snapshot: true, ID: "snap-1"}) {
		t.Fatalf("fetched %+v", got)
	}
	sameTree(t, src, filepath.Join(h.pools["fast"], "pvc-restored"))
	// A retry is the volume (its recorded source is the snapshot).
	if _, err := h.call(req); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteCloneRetriesWhileCopying(t *testing.T) {
	src := remoteTree(t)
	gate := make(chan struct{})
	f := &fakeRemote{dir: src, node: remoteNode, alloc: 9 << 20, gate: gate, blockAfter: 1 << 20}
	h := newRemoteHarness(t, f)
	req := remoteCloneReq("pvc-copy", "pvc-src")
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		_, err = h.call(req)
		if strings.Contains(err.Error(), "copying from node") {
			break
		}
	}
	grpctest.WantCode(t, err, codes.Aborted, `volume "pvc-copy": copying from node node-b: `, " of 9.0 MiB at ", "MiB/s", "operation pending")
	// The same name from another source while the copy runs.
	_, err = h.call(remoteCloneReq("pvc-copy", "pvc-other"))
	grpctest.WantCode(t, err, codes.AlreadyExists, `volume "pvc-copy" is being copied from volume:pvc-src`)
	if n := len(h.stagedCreates(t, "fast")); n != 1 {
		t.Fatalf("%d staged creates during the copy, want 1", n)
	}
	close(gate)
	if _, err := h.until(t, req); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, filepath.Join(h.pools["fast"], "pvc-copy"))
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1 (retries join the job)", n)
	}
}

func TestRemoteCloneFailureLeavesNothing(t *testing.T) {
	src := remoteTree(t)
	f := &fakeRemote{dir: src, node: remoteNode, failAfter: 1 << 20,
		failErr: fmt.Errorf("node node-b: connection reset: %w", pools.ErrSourceUnavailable)}
	h := newRemoteHarness(t, f)
	req := remoteCloneReq("pvc-copy", "pvc-src")
	_, err := h.until(t, req)
	grpctest.WantCode(t, err, codes.Unavailable, `volume "pvc-copy": copying volume:pvc-src from node node-b: `, "connection reset")
	if _, err := h.rt.Find(context.Background(), "pvc-copy"); err == nil {
		t.Fatal("a failed copy left a volume")
	}
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("a failed copy left %v in staging", s)
	}
	// The failure was answered once: the next retry starts over.
	f.set(func(f *fakeRemote) { f.failAfter = 0 })
	if _, err := h.until(t, req); err != nil {
		t.Fatal(err)
	}
	if n := f.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	sameTree(t, src, filepath.Join(h.pools["fast"], "pvc-copy"))
	if !strings.Contains(gather(t, h), `hpp_pool_remote_copies_total{pool="fast",result="unavailable"} 1`) {
		t.Fatal("the failed copy is not counted")
	}
}

func TestRemoteFetchErrorsKeepTheirCode(t *testing.T) {
	f := &fakeRemote{dir: t.TempDir(), node: remoteNode}
	h := newRemoteHarness(t, f)
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("node node-b has no volume pvc-src: %w", pools.ErrSourceNotFound), codes.NotFound},
		{fmt.Errorf("node node-b refused claim ns/claim-pvc-copy: %w", pools.ErrNotAuthorized), codes.PermissionDenied},
		{fmt.Errorf("node node-b: dial: %w", pools.ErrSourceUnavailable), codes.Unavailable},
		{fmt.Errorf("node node-b: bad request: %w", pools.ErrSourceInvalid), codes.InvalidArgument},
		{errors.New("node node-b: something else"), codes.Internal},
	} {
		f.set(func(f *fakeRemote) { f.fetchErr = c.err })
		_, err := h.until(t, remoteCloneReq("pvc-copy", "pvc-src"))
		grpctest.WantCode(t, err, c.code, `volume "pvc-copy": fetching volume:pvc-src from the node that holds it: `+c.err.Error())
	}
}

func TestDeleteVolumeCancelsRemoteCopy(t *testing.T) {
	src := remoteTree(t)
	gate := make(chan struct{})
	defer close(gate)
	f := &fakeRemote{dir: src, node: remoteNode, gate: gate, blockAfter: 1 << 20}
	h := newRemoteHarness(t, f)
	req := remoteCloneReq("pvc-copy", "pvc-src")
	_, err := h.call(req)
	grpctest.WantCode(t, err, codes.Aborted, "operation pending")
	// The job runs detached: wait until it is fetching, so that the delete
	// below cancels a copy in flight rather than one not yet started.
	for end := time.Now().Add(10 * time.Second); f.fetches.Load() == 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-copy"}); err != nil {
		t.Fatal(err)
	}
	if f.canceled.Load() != 1 {
		t.Fatal("the fetch was not canceled")
	}
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("a canceled copy left %v in staging", s)
	}
	if _, err := h.rt.Find(ctx, "pvc-copy"); err == nil {
		t.Fatal("a canceled copy left a volume")
	}
	if !strings.Contains(gather(t, h), `hpp_pool_remote_copies_total{pool="fast",result="canceled"} 1`) {
		t.Fatal("the canceled copy is not counted")
	}
	// Deleting again is fine, and a new request starts a new copy.
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-copy"}); err != nil {
		t.Fatal(err)
	}
	_, err = h.call(req)
	grpctest.WantCode(t, err, codes.Aborted, "operation pending")
	if n := f.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
}

// A restart forgets the job: the store's recovery at open removes the
// staged directory the copy was filling (here while the old runtime's copy
// still waits, as a killed process would have left it).
func TestRestartDropsUnfinishedRemoteCopy(t *testing.T) {
	src := remoteTree(t)
	gate := make(chan struct{})
	f := &fakeRemote{dir: src, node: remoteNode, gate: gate, blockAfter: 1 << 20}
	h := newRemoteHarness(t, f)
	old := h.rt
	_, err := h.call(remoteCloneReq("pvc-copy", "pvc-src"))
	grpctest.WantCode(t, err, codes.Aborted, "operation pending")
	if n := len(h.stagedCreates(t, "fast")); n != 1 {
		t.Fatalf("%d staged creates during the copy, want 1", n)
	}
	h.d, h.rt = h.newDriver(t)
	if err := h.rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("recovery left %v in staging", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := old.StopCopy(ctx, "pvc-copy"); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if _, err := h.rt.Find(ctx, "pvc-copy"); err == nil {
		t.Fatal("an unfinished copy left a volume")
	}
}

func TestStalledRemoteCopyIsUnavailable(t *testing.T) {
	src := remoteTree(t)
	gate := make(chan struct{})
	defer close(gate)
	f := &fakeRemote{dir: src, node: remoteNode, gate: gate, blockAfter: 1 << 20}
	h := newRemoteHarness(t, f, func(c *Config) { c.CopyStallTimeout = 300 * time.Millisecond })
	_, err := h.until(t, remoteCloneReq("pvc-copy", "pvc-src"))
	grpctest.WantCode(t, err, codes.Unavailable, `copying volume:pvc-src from node node-b: no data received for 300ms`)
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("a stalled copy left %v in staging", s)
	}
}

func TestRemoteCloneNeedsTheClaim(t *testing.T) {
	f := &fakeRemote{dir: t.TempDir(), node: remoteNode}
	h := newRemoteHarness(t, f)
	req := remoteCloneReq("pvc-copy", "pvc-src")
	delete(req.Parameters, paramPVCName)
	_, err := h.call(req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "volume:pvc-src is not on node node-a",
		"csi.storage.k8s.io/pvc/namespace and csi.storage.k8s.io/pvc/name", "--extra-create-metadata")
	if f.fetches.Load() != 0 {
		t.Fatal("fetched without a claim")
	}
}

// gather is the driver's metrics page.
func gather(t *testing.T, h *harness) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(h.d.deps.Metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// A copy from another node into an enforcing pool gets its project quota
// like any create, and a failed one gives its ID back: with one ID in the
// range, the retry after a failure could not be made otherwise.
func TestEnforcedRemoteCloneReleasesItsIDOnFailure(t *testing.T) {
	src := remoteTree(t)
	f := &fakeRemote{dir: src, node: remoteNode, failAfter: 1 << 20,
		failErr: fmt.Errorf("node node-b: connection reset: %w", pools.ErrSourceUnavailable)}
	fake := prjquota.NewFake()
	h := newQuotaHarness(t, fake, pool.IDRange{First: 1, Last: 1})
	h.remote = f
	h.d, h.rt = h.newDriver(t)
	if err := h.rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := remoteCloneReq("pvc-copy", "pvc-src")
	_, err := h.until(t, req)
	grpctest.WantCode(t, err, codes.Unavailable, "connection reset")
	f.set(func(f *fakeRemote) { f.failAfter = 0 })
	if _, err := h.until(t, req); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.pools["fast"], "pvc-copy")
	if id := fake.ProjectOf(dir); id != 1 || fake.Limit(id) != 128<<20 {
		t.Fatalf("clone project %d with limit %d; want 1 limited to 128 MiB", id, fake.Limit(id))
	}
	sameTree(t, src, dir)
}
