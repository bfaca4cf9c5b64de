package handlers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

func expandReq(id string, size int64) *csi.ControllerExpandVolumeRequest {
	return &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: mountCap()}
}

// recordedCapacity reads the size recorded on disk, through a Store of its
// own (whichever form the records take there).
func recordedCapacity(t *testing.T, poolPath, id string) int64 {
	t.Helper()
	s, err := dirvol.Open(poolPath, dirvol.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vol, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return vol.CapacityBytes
}

func TestControllerExpandVolume(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReservationAware = true })
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 64<<20))
	resp, err := h.d.ControllerExpandVolume(ctx, expandReq("pvc-1", 128<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetCapacityBytes() != 128<<20 || resp.GetNodeExpansionRequired() {
		t.Fatalf("expand = %v, want 128 MiB and no node step", resp)
	}
	if got := recordedCapacity(t, h.pools["fast"], "pvc-1"); got != 128<<20 {
		t.Fatalf("record says %d bytes, want %d", got, 128<<20)
	}
	if got := h.rt.Reserved("fast"); got != 128<<20 {
		t.Fatalf("reserved = %d, want the new size %d", got, 128<<20)
	}
	// Idempotent, and never shrinks.
	for _, size := range []int64{128 << 20, 1 << 20} {
		resp, err = h.d.ControllerExpandVolume(ctx, expandReq("pvc-1", size))
		if err != nil || resp.GetCapacityBytes() != 128<<20 {
			t.Fatalf("expand to %d = %v, %v; want the recorded 128 MiB", size, resp, err)
		}
	}
	got, err := h.d.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "pvc-1"})
	if err != nil || got.GetVolume().GetCapacityBytes() != 128<<20 {
		t.Fatalf("ControllerGetVolume = %v, %v; want 128 MiB", got, err)
	}
}

func TestControllerExpandVolumeRefusals(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 64<<20))
	_, err := h.d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-1"})
	grpctest.WantCode(t, err, codes.InvalidArgument, "capacity_range: required")
	_, err = h.d.ControllerExpandVolume(ctx, expandReq("", 1))
	grpctest.WantCode(t, err, codes.InvalidArgument, "volume_id: required")
	_, err = h.d.ControllerExpandVolume(ctx, expandReq("pvc-none", 1<<20))
	grpctest.WantCode(t, err, codes.NotFound, `volume "pvc-none" does not exist on node node-a`)
	_, err = h.d.ControllerExpandVolume(ctx, expandReq("pvc-1", 2<<30))
	grpctest.WantCode(t, err, codes.OutOfRange, "requested 2147483648 bytes exceeds the total size 1073741824 bytes", `"fast"`)
	// 512 MiB free: growing 64 MiB by 600 MiB does not fit.
	_, err = h.d.ControllerExpandVolume(ctx, expandReq("pvc-1", 664<<20))
	grpctest.WantCode(t, err, codes.ResourceExhausted, "can offer 536870912 bytes now", "less than the 629145600 bytes this expansion adds")
	if got := recordedCapacity(t, h.pools["fast"], "pvc-1"); got != 64<<20 {
		t.Fatalf("refused expansion changed the record to %d bytes", got)
	}
	release, err := h.rt.Lock("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, err = h.d.ControllerExpandVolume(ctx, expandReq("pvc-1", 65<<20))
	grpctest.WantCode(t, err, codes.Aborted, `an operation on volume "pvc-1" is already in progress`)
}

// A directory made by the KubeVirt driver has no record: expansion gives it
// one with the new size.
func TestControllerExpandAdoptedVolume(t *testing.T) {
	h := newHarness(t)
	if err := os.Mkdir(filepath.Join(h.pools["slow"], "pvc-old"), 0o777); err != nil {
		t.Fatal(err)
	}
	resp, err := h.d.ControllerExpandVolume(context.Background(), expandReq("pvc-old", 10<<20))
	if err != nil || resp.GetCapacityBytes() != 10<<20 {
		t.Fatalf("expand = %v, %v; want 10 MiB", resp, err)
	}
	if got := recordedCapacity(t, h.pools["slow"], "pvc-old"); got != 10<<20 {
		t.Fatalf("record says %d bytes", got)
	}
}
