package handlers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
)

// Without hpp-mounter's marker a mounted pool is not opened (nothing is
// written to the bare directory), offers no capacity and creates say why;
// with it the pool opens; losing it refuses creates again.
func TestMountedPoolNeedsTheMarker(t *testing.T) {
	h := newUnopenedHarness(t, mountedFast)
	fast := h.pools["fast"]
	if err := os.Mkdir(fast, 0o755); err != nil { // the bare mount point
		t.Fatal(err)
	}
	ctx := context.Background()
	want := `storage pool "fast" is not ready: it is not mounted: marker ` + filepath.Join(fast, ".hpp-pool") +
		` is missing; hpp-mounter writes the marker once the pool's PVC is mounted there, and hpp-csi never uses the bare directory`
	if err := h.rt.OpenPools(ctx); err == nil || err.Error() != want {
		t.Fatalf("OpenPools = %v, want %s", err, want)
	}
	if entries, _ := os.ReadDir(fast); len(entries) != 0 {
		t.Errorf("the bare directory was written to: %v", entries)
	}
	// Probe (and /healthz) stay ready: the pool is refused per request, its
	// mounter's readiness says it is not mounted, and the node's other pools
	// keep serving (see Ready).
	if resp, _ := h.d.Probe(ctx, &csi.ProbeRequest{}); !resp.GetReady().GetValue() {
		t.Error("Probe not ready because a mounted pool waits for its mounter")
	}
	if capResp, err := h.d.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: map[string]string{contract.ParamStoragePool: "fast"}}); err != nil || capResp.GetAvailableCapacity() != 0 {
		t.Errorf("GetCapacity of the unmounted pool = %v, %v; want zero", capResp, err)
	}
	_, err := h.d.CreateVolume(ctx, createReq("pvc-1", "fast", 1<<20))
	grpctest.WantCode(t, err, codes.Unavailable, want)

	if err := poolmarker.Ensure(fast, poolmarker.Marker{Pool: "fast"}); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.OpenPools(ctx); err != nil {
		t.Fatal(err)
	}
	h.mustCreate(t, createReq("pvc-1", "fast", 1<<20))
	if err := os.Remove(filepath.Join(fast, ".hpp-pool")); err != nil {
		t.Fatal(err)
	}
	_, err = h.d.CreateVolume(ctx, createReq("pvc-2", "fast", 1<<20))
	grpctest.WantCode(t, err, codes.Unavailable, want)
}
