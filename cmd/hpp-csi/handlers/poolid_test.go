package handlers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
)

// A directory pool gets an identity when it opens; every volume records it;
// a new marker (a new disk at the same path) refuses the old volumes with
// FailedPrecondition and a health condition, while volumes without an
// identity publish as before.
func TestPoolIdentityRecordedAndChecked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	old, err := poolmarker.Read(h.pools["fast"])
	if err != nil || len(old.ID) != 36 || old.CreatedBy != "hpp-csi" || old.Pool != "fast" {
		t.Fatalf("marker of the opened pool: %+v, %v; want one made by hpp-csi with a UUID", old, err)
	}
	resp, err := h.d.CreateVolume(ctx, createReq("pvc-1", "fast", 1))
	if err != nil {
		t.Fatal(err)
	}
	volCtx := resp.GetVolume().GetVolumeContext()
	if volCtx[contract.VolumeContextPoolID] != old.ID || volCtx[contract.ParamStoragePool] != "fast" {
		t.Fatalf("volume context %v, want %s=%s", volCtx, contract.VolumeContextPoolID, old.ID)
	}
	publish := func(target string, volCtx map[string]string) error {
		req := publishReq("pvc-1", filepath.Join(h.dir, "pods", target, "mount"))
		req.VolumeContext = volCtx
		_, err := h.d.NodePublishVolume(ctx, req)
		return err
	}
	if err := publish("a", volCtx); err != nil {
		t.Fatalf("publish under the same identity: %v", err)
	}

	// The disk is replaced: a new marker at the same path.
	if err := os.Remove(poolmarker.Path(h.pools["fast"])); err != nil {
		t.Fatal(err)
	}
	if err := poolmarker.Ensure(h.pools["fast"], poolmarker.Marker{Pool: "fast"}); err != nil {
		t.Fatal(err)
	}
	fresh, _ := poolmarker.Read(h.pools["fast"])
	want := fmt.Sprintf("volume %q was created in storage pool %q with pool identity %s, but the pool at %s on node %s now has identity %s: "+
		"its disk was replaced or re-created since (a new disk at the same path, or a node recreated under the same name), so the volume's data is not there; "+
		"hpp-csi does not publish an empty directory in its place. Mount the original disk back, or delete the claim so a new volume is made",
		"pvc-1", "fast", old.ID, h.pools["fast"], testNode, fresh.ID)
	err = publish("b", volCtx)
	grpctest.WantCode(t, err, codes.FailedPrecondition, want)
	health, err := h.d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-1"})
	if err != nil {
		t.Fatal(err)
	}
	entries := health.GetVolumeHealth().GetHealthStatuses()
	if len(entries) != 1 || entries[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE ||
		entries[0].GetReason() != "PoolIdentityChanged" || entries[0].GetMessage() != want {
		t.Fatalf("volume health %v, want INACCESSIBLE PoolIdentityChanged %q", entries, want)
	}

	// A volume without an identity (made before identities, or by the
	// KubeVirt driver) publishes as today.
	if err := publish("c", map[string]string{contract.ParamStoragePool: "fast"}); err != nil {
		t.Fatalf("publish without identity: %v", err)
	}
	if err := publish("d", nil); err != nil {
		t.Fatalf("publish without volume context: %v", err)
	}

	// The original disk is back: the volume publishes, the condition clears.
	if err := os.Remove(poolmarker.Path(h.pools["fast"])); err != nil {
		t.Fatal(err)
	}
	if err := poolmarker.Ensure(h.pools["fast"], old); err != nil {
		t.Fatal(err)
	}
	if err := publish("e", volCtx); err != nil {
		t.Fatalf("publish with the original disk back: %v", err)
	}
	health, err = h.d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-1"})
	if err != nil || len(health.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Fatalf("volume health with the original disk back: %v, %v; want healthy", health, err)
	}
}
