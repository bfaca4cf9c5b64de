package handlers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

func publishReq(id, target string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: mountCap()}
}

func TestNodePublishAndUnpublish(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, id := range []string{"pvc-1", "pvc-2"} {
		h.mustCreate(t, createReq(id, "fast", 1))
	}
	target := filepath.Join(h.dir, "pods", "uid", "mount")
	req := publishReq("pvc-1", target)
	req.Readonly = true
	if _, err := h.d.NodePublishVolume(ctx, req); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(h.pools["fast"], "pvc-1")
	if h.mounter.Mounts[target] != src || !h.mounter.ReadOnly[target] {
		t.Fatalf("mounts %v readOnly %v, want %s read-only at %s", h.mounter.Mounts, h.mounter.ReadOnly, src, target)
	}
	if _, err := h.d.NodePublishVolume(ctx, req); err != nil {
		t.Fatalf("repeat publish: %v", err)
	}
	_, err := h.d.NodePublishVolume(ctx, publishReq("pvc-2", target))
	grpctest.WantCode(t, err, codes.AlreadyExists, "already has another volume mounted")

	if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("target still exists: %v", err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("unpublish touched the volume: %v", err)
	}
	if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target}); err != nil {
		t.Fatalf("repeat unpublish: %v", err)
	}
}

// A PV that upstream's provisioner wrote carries spec.csi.fsType: xfs; kubelet
// passes it on every publish, and the volume must mount as before.
func TestNodePublishIgnoresUpstreamFsType(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 1))
	target := filepath.Join(h.dir, "pods", "uid", "mount")
	req := publishReq("pvc-1", target)
	req.VolumeCapability.GetMount().FsType = "xfs"
	if _, err := h.d.NodePublishVolume(ctx, req); err != nil {
		t.Fatalf("publish with fsType xfs: %v", err)
	}
	if src := filepath.Join(h.pools["fast"], "pvc-1"); h.mounter.Mounts[target] != src {
		t.Fatalf("mounts %v, want %s at %s", h.mounter.Mounts, src, target)
	}
	vr, err := h.d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{req.VolumeCapability}})
	if err != nil || vr.GetConfirmed() == nil {
		t.Fatalf("ValidateVolumeCapabilities with fsType xfs = %v, %v; want confirmed", vr, err)
	}
}

func TestNodeUnpublishKeepsDataInAnUnmountedTarget(t *testing.T) {
	h := newHarness(t)
	target := filepath.Join(h.dir, "target")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := h.d.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target})
	grpctest.WantCode(t, err, codes.Internal, "not a mount point and not empty")
	if _, err := os.Stat(filepath.Join(target, "precious")); err != nil {
		t.Fatalf("data in the target was removed: %v", err)
	}
}

func TestNodePublishRefusals(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	badFlag := publishReq("pvc-1", "/tmp/t")
	badFlag.VolumeCapability.GetMount().MountFlags = []string{"nosuid,uid=5"}
	staged := publishReq("pvc-1", "/tmp/t")
	staged.StagingTargetPath = "/tmp/s"
	cases := []struct {
		name  string
		req   *csi.NodePublishVolumeRequest
		code  codes.Code
		parts []string
	}{
		{"no id", publishReq("", "/tmp/t"), codes.InvalidArgument, []string{"volume_id: required"}},
		{"relative target", publishReq("pvc-1", "tmp/t"), codes.InvalidArgument, []string{"target_path", "absolute"}},
		{"unsupported flag", badFlag, codes.InvalidArgument, []string{`mount flag "uid=5" is not supported`}},
		{"staging", staged, codes.InvalidArgument, []string{"staging_target_path"}},
		{"unknown volume", publishReq("pvc-404", "/tmp/t"), codes.NotFound, []string{`volume "pvc-404" does not exist on node node-a`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.d.NodePublishVolume(ctx, tc.req)
			grpctest.WantCode(t, err, tc.code, tc.parts...)
		})
	}
}

func TestSingleWriterRefusesSecondTarget(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 1))
	req := publishReq("pvc-1", filepath.Join(h.dir, "t1"))
	req.VolumeCapability.AccessMode.Mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	if _, err := h.d.NodePublishVolume(ctx, req); err != nil {
		t.Fatal(err)
	}
	req.TargetPath = filepath.Join(h.dir, "t2")
	_, err := h.d.NodePublishVolume(ctx, req)
	grpctest.WantCode(t, err, codes.FailedPrecondition, "SINGLE_NODE_SINGLE_WRITER", "already published at")
}

func TestEphemeralVolumeLivesWithItsPod(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	target := filepath.Join(h.dir, "pod", "vol")
	req := publishReq("csi-0123abcd", target)
	req.VolumeContext = map[string]string{ephemeralContextKey: "true", podUIDContextKey: "uid-1", contract.ParamStoragePool: "slow"}
	if _, err := h.d.NodePublishVolume(ctx, req); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.pools["slow"], "csi-0123abcd")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("ephemeral directory: %v", err)
	}
	if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-0123abcd", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("ephemeral directory outlived its pod: %v", err)
	}
}

func TestPersistentVolumeWithEphemeralLookingIDSurvivesUnpublish(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustCreate(t, createReq("csi-0123abcd", "fast", 1))
	target := filepath.Join(h.dir, "t")
	if _, err := h.d.NodePublishVolume(ctx, publishReq("csi-0123abcd", target)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-0123abcd", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.pools["fast"], "csi-0123abcd")); err != nil {
		t.Fatalf("persistent volume deleted by unpublish: %v", err)
	}
	// And it cannot be hijacked as an ephemeral volume either.
	req := publishReq("csi-0123abcd", target)
	req.VolumeContext = map[string]string{ephemeralContextKey: "true", contract.ParamStoragePool: "fast"}
	_, err := h.d.NodePublishVolume(ctx, req)
	grpctest.WantCode(t, err, codes.AlreadyExists, "already exists as a persistent volume")
}

func TestNodeGetVolumeStatsMeasuresTheVolumeAndCaches(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 1))
	dir := filepath.Join(h.pools["fast"], "pvc-1")
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	req := &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-1", VolumePath: dir}
	for i := 0; i < 3; i++ {
		resp, err := h.d.NodeGetVolumeStats(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		bytes, inodes := resp.GetUsage()[0], resp.GetUsage()[1]
		if bytes.GetUsed() < 2<<20 || bytes.GetAvailable() != 512<<20 || inodes.GetUsed() != 3 {
			t.Fatalf("usage = %v, want >= 2 MiB used, 512 MiB available, 3 inodes", resp.GetUsage())
		}
	}
	if h.fs.Walks != 1 {
		t.Fatalf("walked %d times, want 1 (cached)", h.fs.Walks)
	}
	_, err := h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-1", VolumePath: "/nonexistent/x"})
	grpctest.WantCode(t, err, codes.NotFound, "/nonexistent/x")
}

func TestHealthReportsEachProblemWithAReason(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, id := range []string{"pvc-1", "pvc-2"} {
		h.mustCreate(t, createReq(id, "fast", 1))
	}
	health := func(id string) []*csi.VolumeHealth_VolumeHealthEntry {
		t.Helper()
		resp, err := h.d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetVolumeHealth().GetHealthStatuses()
	}
	if got := health("pvc-1"); len(got) != 0 {
		t.Fatalf("healthy volume reports %v", got)
	}
	if err := os.RemoveAll(filepath.Join(h.pools["fast"], "pvc-2")); err != nil {
		t.Fatal(err)
	}
	if got := health("pvc-2"); len(got) != 1 || got[0].GetReason() != pools.ReasonVolumeDirMissing || got[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE {
		t.Fatalf("missing directory reports %v", got)
	}
	st := gib(1, 0)
	st.FreeInodes = 0
	h.fs.SetStats(h.pools["fast"], st)
	got := health("pvc-1")
	if len(got) != 2 || got[0].GetReason() != pools.ReasonPoolFull || got[1].GetReason() != pools.ReasonPoolNoInodes {
		t.Fatalf("full pool reports %v, want PoolFull and PoolOutOfInodes", got)
	}
	h.fs.SetStats(h.pools["fast"], gib(1, 0.5))
	h.fs.Devices[h.pools["fast"]] = 4242
	if got := health("pvc-1"); len(got) != 1 || got[0].GetReason() != pools.ReasonPoolMountLost {
		t.Fatalf("lost mount reports %v", got)
	}
	list, err := h.d.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The lost pool's volumes cannot be listed (their directory is on the
	// disk that is gone); NodeGetStorageHealth reports the pool instead.
	if len(list.GetEntries()) != 0 {
		t.Fatalf("ControllerListVolumeHealth listed %v from an unreadable pool", list.GetEntries())
	}
	// Unavailable on a lost pool, never a false success.
	_, err = h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"})
	grpctest.WantCode(t, err, codes.Unavailable)
	storage, err := h.d.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if b := storage.GetBackendHealth(); len(b) != 1 || b[0].GetStatus() != csi.StorageHealthErrorType_STORAGE_UNREACHABLE {
		t.Fatalf("storage health %v, want one STORAGE_UNREACHABLE", b)
	}
	probe, _ := h.d.Probe(ctx, &csi.ProbeRequest{})
	if probe.GetReady().GetValue() {
		t.Fatal("Probe ready while a pool's mount is lost")
	}
}

func TestProbeWaitsForMissingPool(t *testing.T) {
	h := newUnopenedHarness(t)
	ctx := context.Background()
	hostDir := filepath.Dir(h.pools["slow"])
	if err := os.RemoveAll(hostDir); err != nil {
		t.Fatal(err)
	}
	err := h.rt.OpenPools(ctx)
	if err == nil || !strings.Contains(err.Error(), `storage pool "slow" is not ready`) || !strings.Contains(err.Error(), "is the pool's disk mounted?") {
		t.Fatalf("OpenPools = %v, want the slow pool refused for its missing disk", err)
	}
	probe, _ := h.d.Probe(ctx, &csi.ProbeRequest{})
	if probe.GetReady().GetValue() {
		t.Fatal("ready with a missing pool")
	}
	_, err = h.d.CreateVolume(ctx, createReq("pvc-1", "slow", 1))
	grpctest.WantCode(t, err, codes.Unavailable, `storage pool "slow" is not ready`, "is the pool's disk mounted?")
	if _, err := os.Stat(hostDir); !os.IsNotExist(err) {
		t.Fatal("the driver created a missing pool directory (it would land on the OS disk)")
	}
	// The disk appears. Read paths still write nothing: only the runner
	// opens the pool (and creates its volumes directory).
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if probe, _ = h.d.Probe(ctx, &csi.ProbeRequest{}); probe.GetReady().GetValue() {
		t.Fatal("Probe opened the pool itself")
	}
	if _, err := os.Stat(h.pools["slow"]); !os.IsNotExist(err) {
		t.Fatalf("Probe created the volumes directory: %v", err)
	}
	h.rt.RetryPools(ctx, time.Millisecond) // returns once every pool is open
	if probe, _ = h.d.Probe(ctx, &csi.ProbeRequest{}); !probe.GetReady().GetValue() {
		t.Fatalf("not ready after the pool appeared: %v", h.rt.Ready(ctx))
	}
	if fi, err := os.Stat(h.pools["slow"]); err != nil || !fi.IsDir() {
		t.Fatalf("volumes directory not created when its parent appeared: %v", err)
	}
	// The volumes directory vanishes under a running driver (its disk was
	// unmounted): requests fail and nothing recreates it.
	if err := os.RemoveAll(h.pools["slow"]); err != nil {
		t.Fatal(err)
	}
	_, err = h.d.CreateVolume(ctx, createReq("pvc-1", "slow", 1))
	grpctest.WantCode(t, err, codes.Unavailable, "is gone: its mount disappeared")
	if probe, _ = h.d.Probe(ctx, &csi.ProbeRequest{}); probe.GetReady().GetValue() {
		t.Fatal("ready with the volumes directory gone")
	}
	if _, err := os.Stat(h.pools["slow"]); !os.IsNotExist(err) {
		t.Fatalf("a read path recreated the volumes directory: %v", err)
	}
}

func TestRecoverInterceptorTurnsPanicIntoInternal(t *testing.T) {
	h := newHarness(t)
	_, err := h.d.recoverInterceptor(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodePublishVolume"},
		func(context.Context, any) (any, error) { panic("boom") })
	grpctest.WantCode(t, err, codes.Internal, "panic: boom")
	_, err = h.d.recoverInterceptor(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { return nil, dirvol.ErrNotFound })
	grpctest.WantCode(t, err, codes.NotFound)
}
