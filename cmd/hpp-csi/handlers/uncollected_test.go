package handlers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

// The sweep of copies from other nodes that no CreateVolume collected
// (pools/uncollected.go): csi-provisioner v6.4.0 stops calling CreateVolume
// for a clone whose source claim is being deleted, so a copy that outlasted
// the first call is left in the pool, named by no PV. These tests make
// that volume (uncollectedCopy) and sweep it with the API server faked.

// copyUID is the claim UID the volumes of these tests are named after, as
// csi-provisioner names them (pvc-<claim UID>).
const copyUID = "0b0c7c0e-1111-4222-8333-444455556666"

const copyID = "pvc-" + copyUID

// uncollectedMarkAttr is pools' mark of an uncollected copy.
const uncollectedMarkAttr = "hpp.kubevirt.io/uncollected"

// fakeClaims is the API server as the sweep reads it: claims by
// "namespace/name" with their UID, PV names, and a failure for each kind
// of read.
type fakeClaims struct {
	mu       sync.Mutex
	claims   map[string]string
	pvs      map[string]bool
	claimErr error
	pvErr    error
	asked    []string
}

func newFakeClaims() *fakeClaims {
	return &fakeClaims{claims: map[string]string{}, pvs: map[string]bool{}}
}

func (f *fakeClaims) ClaimUID(_ context.Context, ns, name string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "claim "+ns+"/"+name)
	if f.claimErr != nil {
		return "", false, f.claimErr
	}
	uid, ok := f.claims[ns+"/"+name]
	return uid, ok, nil
}

func (f *fakeClaims) PersistentVolumeExists(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "pv "+name)
	if f.pvErr != nil {
		return false, f.pvErr
	}
	return f.pvs[name], nil
}

func (f *fakeClaims) set(fn func(f *fakeClaims)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

// newSweepHarness is a remote harness whose runtime sweeps with claims.
func newSweepHarness(t *testing.T, f *fakeRemote, claims *fakeClaims) *harness {
	t.Helper()
	h := newUnopenedHarness(t)
	h.remote, h.claims = f, claims
	h.d, h.rt = h.newDriver(t)
	if err := h.rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// uncollectedCopy makes what the bug left: CreateVolume of copyID (claim
// ns/claim-<copyID>) from a source on node-b answered "pending" while the
// copy was held, then the copy finished and no CreateVolume came again. It
// returns the harness and the volume's directory, which holds the copy and
// is marked.
func uncollectedCopy(t *testing.T, claims *fakeClaims) (*harness, string) {
	t.Helper()
	gate := make(chan struct{})
	f := &fakeRemote{dir: remoteTree(t), node: remoteNode, gate: gate, blockAfter: 1 << 10}
	h := newSweepHarness(t, f, claims)
	_, err := h.call(remoteCloneReq(copyID, "pvc-src"))
	grpctest.WantCode(t, err, codes.Aborted, "operation pending")
	close(gate)
	dir := filepath.Join(h.pools["fast"], copyID)
	waitCopied(t, h)
	sameTree(t, f.dir, dir)
	if mark := markOf(t, h); mark != "ns/claim-"+copyID+"@"+testNode {
		t.Fatalf("the copied volume's mark is %q, want the claim and this node", mark)
	}
	return h, dir
}

// waitCopied waits for the copy into copyID to be published.
func waitCopied(t *testing.T, h *harness) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := h.rt.Find(context.Background(), copyID); err == nil {
			return
		}
	}
	t.Fatal("the copy did not finish")
}

// markOf is copyID's mark ("" for none).
func markOf(t *testing.T, h *harness) string {
	t.Helper()
	vol, err := h.rt.Find(context.Background(), copyID)
	if err != nil {
		t.Fatal(err)
	}
	return vol.Attributes[uncollectedMarkAttr]
}

// sweep runs one sweep and checks what it removed.
func sweep(t *testing.T, h *harness, want ...string) error {
	t.Helper()
	removed, err := h.rt.SweepUncollected(context.Background())
	if !slices.Equal(removed, want) {
		t.Fatalf("the sweep removed %v (error %v), want %v", removed, err, want)
	}
	return err
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// The bug: the claim is gone and no PV names the volume: the sweep
// removes it, through DeleteVolume's path (trash), leaving nothing staged,
// and a second sweep has nothing to do.
func TestUncollectedCopyOfGoneClaimRemoved(t *testing.T) {
	claims := newFakeClaims()
	h, dir := uncollectedCopy(t, claims)
	if err := sweep(t, h, copyID); err != nil {
		t.Fatal(err)
	}
	if exists(t, dir) {
		t.Fatal("the volume is still in the pool")
	}
	if _, err := h.rt.Find(context.Background(), copyID); err == nil {
		t.Fatal("the volume is still found")
	}
	if s := h.stagedCreates(t, "fast"); len(s) != 0 {
		t.Fatalf("staging holds %v", s)
	}
	if want := []string{"claim ns/claim-" + copyID, "pv " + copyID}; !slices.Equal(claims.asked, want) {
		t.Fatalf("the sweep asked %v, want %v", claims.asked, want)
	}
	if err := sweep(t, h); err != nil || len(claims.asked) != 2 {
		t.Fatalf("a second sweep: %v, asked %v; want nothing asked", err, claims.asked)
	}
	// The name is free: a DeleteVolume of it succeeds (nothing there).
	if _, err := h.d.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: copyID}); err != nil {
		t.Fatal(err)
	}
}

// A claim of that name made again (another UID) is not the one the volume
// was made for.
func TestUncollectedCopyOfReplacedClaimRemoved(t *testing.T) {
	claims := newFakeClaims()
	claims.claims["ns/claim-"+copyID] = "99999999-1111-4222-8333-444455556666"
	h, dir := uncollectedCopy(t, claims)
	if err := sweep(t, h, copyID); err != nil || exists(t, dir) {
		t.Fatalf("sweep: %v, directory left %v", err, exists(t, dir))
	}
}

// While its claim is there (Pending, csi-provisioner may still call) the
// volume stays marked; a CreateVolume then collects it (the mark goes),
// and once collected it is never swept, even with the claim gone.
func TestUncollectedCopyOfPresentClaimKept(t *testing.T) {
	claims := newFakeClaims()
	claims.claims["ns/claim-"+copyID] = copyUID
	h, dir := uncollectedCopy(t, claims)
	for range 2 {
		if err := sweep(t, h); err != nil {
			t.Fatal(err)
		}
	}
	if !exists(t, dir) || markOf(t, h) == "" {
		t.Fatal("the volume of a present claim was removed or unmarked")
	}
	if _, err := h.call(remoteCloneReq(copyID, "pvc-src")); err != nil {
		t.Fatal(err)
	}
	if mark := markOf(t, h); mark != "" {
		t.Fatalf("collected, the volume is still marked %q", mark)
	}
	claims.set(func(f *fakeClaims) { delete(f.claims, "ns/claim-"+copyID); f.asked = nil })
	if err := sweep(t, h); err != nil || !exists(t, dir) || len(claims.asked) != 0 {
		t.Fatalf("a collected volume swept: %v, directory %v, asked %v", err, exists(t, dir), claims.asked)
	}
}

// An API server that fails is no answer: the volume is kept, marked, and
// the error says which read failed; the next sweep that gets answers
// removes it.
func TestUncollectedCopyKeptOnAPIError(t *testing.T) {
	claims := newFakeClaims()
	claims.claimErr = errors.New("connection refused")
	h, dir := uncollectedCopy(t, claims)
	err := sweep(t, h)
	if err == nil || !strings.Contains(err.Error(), "claim ns/claim-"+copyID) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("sweep error %v; want it to name the claim and the cause", err)
	}
	if !exists(t, dir) || markOf(t, h) == "" {
		t.Fatal("the volume was removed or unmarked on an API error")
	}
	claims.set(func(f *fakeClaims) { f.claimErr, f.pvErr = nil, errors.New("i/o timeout") })
	if err := sweep(t, h); err == nil || !strings.Contains(err.Error(), "PersistentVolume") || !exists(t, dir) {
		t.Fatalf("PV lookup failed: %v, directory %v; want the volume kept and the error", err, exists(t, dir))
	}
	claims.set(func(f *fakeClaims) { f.pvErr = nil })
	if err := sweep(t, h, copyID); err != nil || exists(t, dir) {
		t.Fatalf("answers again: %v, directory %v", err, exists(t, dir))
	}
}

// A PV of the volume's name: it was handed over (its DeleteVolume will
// remove it); the sweep keeps it and drops the mark.
func TestUncollectedCopyWithPVKept(t *testing.T) {
	claims := newFakeClaims()
	claims.pvs[copyID] = true
	h, dir := uncollectedCopy(t, claims)
	if err := sweep(t, h); err != nil {
		t.Fatal(err)
	}
	if !exists(t, dir) || markOf(t, h) != "" {
		t.Fatalf("with a PV: directory %v, mark %q; want kept, unmarked", exists(t, dir), markOf(t, h))
	}
}

// A restart forgets the copy jobs; the mark is in the volume's record, so
// a new runtime over the same pool (as hpp-csi after a restart) still
// sweeps it, and keeps it while its claim is there.
func TestUncollectedCopySweptAfterRestart(t *testing.T) {
	claims := newFakeClaims()
	claims.claims["ns/claim-"+copyID] = copyUID
	h, dir := uncollectedCopy(t, claims)
	restart := func() {
		t.Helper()
		h.d, h.rt = h.newDriver(t)
		if err := h.rt.OpenPools(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	restart()
	if err := sweep(t, h); err != nil || !exists(t, dir) || markOf(t, h) == "" {
		t.Fatalf("after a restart, claim present: %v, directory %v", err, exists(t, dir))
	}
	claims.set(func(f *fakeClaims) { delete(f.claims, "ns/claim-"+copyID) })
	restart()
	if err := sweep(t, h, copyID); err != nil || exists(t, dir) {
		t.Fatalf("after a restart, claim gone: %v, directory %v", err, exists(t, dir))
	}
}

// A volume being worked on (its lock held: a CreateVolume or DeleteVolume
// of it) is left for the next sweep.
func TestUncollectedCopyBusySkipped(t *testing.T) {
	claims := newFakeClaims()
	h, dir := uncollectedCopy(t, claims)
	release, err := h.rt.Lock(copyID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sweep(t, h); err != nil || !exists(t, dir) {
		t.Fatalf("busy: %v, directory %v", err, exists(t, dir))
	}
	release()
	if err := sweep(t, h, copyID); err != nil {
		t.Fatal(err)
	}
}
