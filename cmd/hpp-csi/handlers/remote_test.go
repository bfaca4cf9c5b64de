package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

const remoteNode = "node-b"

// remoteTree makes the source another node serves: a directory with an
// owner and mode, random data with an xattr and old times, a hard link to
// it, a symlink, a character device and a sparse file.
func remoteTree(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "d")
	must(os.Mkdir(dir, 0o750))
	must(os.Chown(dir, 1234, 5678))
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	file := filepath.Join(dir, "data")
	must(os.WriteFile(file, data, 0o640))
	must(os.Chown(file, 1000, 1000))
	must(unix.Setxattr(file, "user.hpp", []byte("kept"), 0))
	must(os.Link(file, filepath.Join(root, "link")))
	must(os.Symlink("d/data", filepath.Join(root, "sym")))
	must(unix.Mknod(filepath.Join(root, "null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	sparse, err := os.Create(filepath.Join(root, "sparse"))
	must(err)
	must(sparse.Truncate(64 << 20))
	_, err = sparse.WriteAt([]byte("middle"), 32<<20)
	must(err)
	must(sparse.Close())
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(file, old, old))
	must(os.Chtimes(dir, old, old))
	return root
}

// sameTree fails unless got holds what want holds, entry by entry: type,
// mode, owner, times, size, data, link targets, devices, xattrs and hard
// links; sparse files must stay sparse.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	links := map[uint64]string{}
	gotLinks := map[uint64]string{}
	err := filepath.WalkDir(want, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == want {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		var ws, gs unix.Stat_t
		if err := unix.Lstat(p, &ws); err != nil {
			return err
		}
		if err := unix.Lstat(filepath.Join(got, rel), &gs); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if ws.Mode != gs.Mode || ws.Uid != gs.Uid || ws.Gid != gs.Gid || ws.Size != gs.Size || ws.Rdev != gs.Rdev {
			return fmt.Errorf("%s: mode/owner/size/rdev %o %d:%d %d %d, want %o %d:%d %d %d", rel,
				gs.Mode, gs.Uid, gs.Gid, gs.Size, gs.Rdev, ws.Mode, ws.Uid, ws.Gid, ws.Size, ws.Rdev)
		}
		if ws.Mode&unix.S_IFMT != unix.S_IFDIR && ws.Mtim != gs.Mtim {
			return fmt.Errorf("%s: mtime %v, want %v", rel, gs.Mtim, ws.Mtim)
		}
		switch ws.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			a, _ := os.Readlink(p)
			b, _ := os.Readlink(filepath.Join(got, rel))
			if a != b {
				return fmt.Errorf("%s: link to %q, want %q", rel, b, a)
			}
		case unix.S_IFREG:
			a, _ := os.ReadFile(p)
			b, _ := os.ReadFile(filepath.Join(got, rel))
			if !bytes.Equal(a, b) {
				return fmt.Errorf("%s: data differs", rel)
			}
			if gs.Blocks > ws.Blocks+64 {
				return fmt.Errorf("%s: %d blocks allocated, the source %d (holes lost)", rel, gs.Blocks, ws.Blocks)
			}
			if first, ok := links[ws.Ino]; ok && gotLinks[gs.Ino] != first {
				return fmt.Errorf("%s: not a hard link of %s", rel, first)
			}
			links[ws.Ino] = rel
			if _, ok := gotLinks[gs.Ino]; !ok {
				gotLinks[gs.Ino] = rel
			}
		}
		buf := make([]byte, 64)
		wn, werr := unix.Lgetxattr(p, "user.hpp", buf)
		gn, gerr := unix.Lgetxattr(filepath.Join(got, rel), "user.hpp", buf[32:])
		if (werr == nil) != (gerr == nil) || werr == nil && string(buf[:wn]) != string(buf[32:32+gn]) {
			return fmt.Errorf("%s: xattr user.hpp differs (%v, %v)", rel, werr, gerr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

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
