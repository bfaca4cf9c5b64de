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
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

func TestCreateVolumeRefusesBadRequests(t *testing.T) {
	h := newHarness(t)
	block := createReq("pvc-1", "fast", 1<<20)
	block.VolumeCapabilities = []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	rwx := createReq("pvc-1", "fast", 1<<20)
	rwx.VolumeCapabilities[0].AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	immediate := createReq("pvc-1", "fast", 1<<20)
	immediate.AccessibilityRequirements = nil
	elsewhere := createReq("pvc-1", "fast", 1<<20)
	elsewhere.AccessibilityRequirements = onNode("node-b")
	typo := createReq("pvc-1", "fast", 1<<20)
	typo.Parameters["storagepool"] = "fast"
	badMode := createReq("pvc-1", "fast", 1<<20)
	badMode.Parameters[ParamDirectoryMode] = "0644"
	badUID := createReq("pvc-1", "fast", 1<<20)
	badUID.Parameters[ParamDirectoryUID] = "-5"
	limit := createReq("pvc-1", "fast", 2<<20)
	limit.CapacityRange.LimitBytes = 1 << 20
	clone := createReq("pvc-1", "fast", 1<<20)
	clone.VolumeContentSource = &csi.VolumeContentSource{}

	cases := []struct {
		name  string
		req   *csi.CreateVolumeRequest
		code  codes.Code
		parts []string
	}{
		{"no name", createReq("", "fast", 1), codes.InvalidArgument, []string{"name: required"}},
		{"dot dot", createReq("..", "fast", 1), codes.InvalidArgument, []string{"name: volume id", `".."`}},
		{"slash", createReq("a/b", "fast", 1), codes.InvalidArgument, []string{"name: volume id", "without '/'"}},
		{"nul", createReq("a\x00b", "fast", 1), codes.InvalidArgument, []string{"NUL"}},
		{"no capabilities", &csi.CreateVolumeRequest{Name: "pvc-1"}, codes.InvalidArgument, []string{"volume_capabilities: at least one"}},
		{"block", block, codes.InvalidArgument, []string{"block access is not supported", "filesystem volumes"}},
		{"multi node", rwx, codes.InvalidArgument, []string{"MULTI_NODE_MULTI_WRITER is not supported", "one node"}},
		{"immediate binding", immediate, codes.InvalidArgument, []string{"WaitForFirstConsumer"}},
		{"another node", elsewhere, codes.InvalidArgument, []string{"node-b", `not this node "node-a"`}},
		{"unknown parameter", typo, codes.InvalidArgument, []string{"parameters.storagepool: unknown parameter"}},
		{"mode without owner rwx", badMode, codes.InvalidArgument, []string{"parameters.directoryMode", "owner rwx"}},
		{"negative uid", badUID, codes.InvalidArgument, []string{"parameters.directoryUID", `"-5"`}},
		{"unknown pool", createReq("pvc-1", "nope", 1), codes.InvalidArgument, []string{"parameters." + contract.ParamStoragePool, "nope"}},
		{"required over limit", limit, codes.InvalidArgument, []string{"exceeds limit_bytes"}},
		{"clone", clone, codes.InvalidArgument, []string{"volume_content_source"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.d.CreateVolume(context.Background(), tc.req)
			grpctest.WantCode(t, err, tc.code, tc.parts...)
			entries, _ := os.ReadDir(h.pools["fast"])
			for _, e := range entries {
				if e.Name()[0] != '.' {
					t.Fatalf("refused request left %s in the pool", e.Name())
				}
			}
		})
	}
}

func TestCreateVolumeCreatesDirectoryAndIsIdempotent(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	req := createReq("pvc-1", "fast", 64<<20)
	req.Parameters[ParamDirectoryMode] = "0750"
	resp, err := h.d.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	v := resp.GetVolume()
	if v.GetVolumeId() != "pvc-1" || v.GetCapacityBytes() != 64<<20 || v.GetVolumeContext()[contract.ParamStoragePool] != "fast" {
		t.Fatalf("volume = %v", v)
	}
	if got := v.GetAccessibleTopology()[0].GetSegments()[contract.TopologyKey]; got != testNode {
		t.Fatalf("topology = %q, want %q", got, testNode)
	}
	dir := filepath.Join(h.pools["fast"], "pvc-1")
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("volume directory %s: %v %v, want mode 0750", dir, fi, err)
	}
	if len(h.labeler.Labelled) != 1 || h.labeler.Labelled[0] != dir {
		t.Fatalf("labelled %v, want [%s]", h.labeler.Labelled, dir)
	}
	// Same name, compatible capacity: same volume.
	again, err := h.d.CreateVolume(ctx, createReq("pvc-1", "fast", 32<<20))
	if err != nil || again.GetVolume().GetCapacityBytes() != 64<<20 {
		t.Fatalf("repeat = %v, %v; want the existing 64 MiB volume", again, err)
	}
	// Same name, incompatible capacity.
	_, err = h.d.CreateVolume(ctx, createReq("pvc-1", "fast", 128<<20))
	grpctest.WantCode(t, err, codes.AlreadyExists, `volume "pvc-1" already exists with capacity 67108864 bytes`)
	// Same name in another pool.
	_, err = h.d.CreateVolume(ctx, createReq("pvc-1", "slow", 1<<20))
	grpctest.WantCode(t, err, codes.AlreadyExists, `already exists in storage pool "fast", not in the requested pool "slow"`)
}

// Upstream's csi-provisioner runs with --default-fstype=xfs, and upstream's
// StorageClasses may name any fs type: a directory volume ignores it.
func TestCreateVolumeIgnoresFsType(t *testing.T) {
	h := newHarness(t)
	for i, fs := range []string{"xfs", "ext4", "ext3", "btrfs"} {
		id := fmt.Sprintf("pvc-%d", i)
		req := createReq(id, "fast", 1<<20)
		req.VolumeCapabilities[0].GetMount().FsType = fs
		resp, err := h.d.CreateVolume(context.Background(), req)
		if err != nil {
			t.Fatalf("fsType %s: %v", fs, err)
		}
		if got := resp.GetVolume().GetVolumeId(); got != id {
			t.Fatalf("fsType %s: volume id %q, want %q", fs, got, id)
		}
		if fi, err := os.Stat(filepath.Join(h.pools["fast"], id)); err != nil || !fi.IsDir() {
			t.Fatalf("fsType %s: volume directory: %v", fs, err)
		}
	}
}

func TestCreateVolumeCapacityChecks(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := h.d.CreateVolume(ctx, createReq("pvc-big", "fast", 2<<30))
	grpctest.WantCode(t, err, codes.OutOfRange, "exceeds the total size 1073741824 bytes", `"fast"`)
	_, err = h.d.CreateVolume(ctx, createReq("pvc-big", "fast", 600<<20))
	grpctest.WantCode(t, err, codes.ResourceExhausted, "can offer 536870912 bytes now", "less than the requested 629145600")
	if _, err := os.Stat(filepath.Join(h.pools["fast"], "pvc-big")); !os.IsNotExist(err) {
		t.Fatalf("refused volume exists on disk: %v", err)
	}
}

func TestCreateVolumeConcurrentSameNameIsAborted(t *testing.T) {
	h := newHarness(t)
	release, err := h.rt.Lock("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.d.CreateVolume(context.Background(), createReq("pvc-1", "fast", 1))
	grpctest.WantCode(t, err, codes.Aborted, `an operation on volume "pvc-1" is already in progress`)
	release()
	if _, err := h.d.CreateVolume(context.Background(), createReq("pvc-1", "fast", 1)); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestDefaultPoolSelection(t *testing.T) {
	h := newHarness(t)
	req := createReq("pvc-1", "", 1)
	delete(req.Parameters, contract.ParamStoragePool)
	_, err := h.d.CreateVolume(context.Background(), req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "parameters."+contract.ParamStoragePool, `"fast"`, `"slow"`)
}

func TestDeleteVolume(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "slow", 1))
	for i := 0; i < 2; i++ {
		if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
			t.Fatalf("delete #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.pools["slow"], "pvc-1")); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
	_, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "../../etc"})
	grpctest.WantCode(t, err, codes.InvalidArgument, "volume_id")
	_, err = h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})
	grpctest.WantCode(t, err, codes.InvalidArgument, "volume_id: required")
}

func TestListVolumesPaginationRoundTrips(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	want := []string{"pvc-a", "pvc-b", "pvc-c", "pvc-d", "pvc-e"}
	for i, id := range want {
		p := "fast"
		if i >= 3 {
			p = "slow"
		}
		h.mustCreate(t, createReq(id, p, 1))
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		resp, err := h.d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetEntries() {
			got = append(got, e.GetVolume().GetVolumeId())
		}
		if pages == 0 {
			// Deleting the last entry of a page must not break the next page.
			if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-b"}); err != nil {
				t.Fatal(err)
			}
		}
		token = resp.GetNextToken()
		if token == "" {
			break
		}
	}
	if len(got) != 5 || got[0] != "pvc-a" || got[1] != "pvc-b" || got[2] != "pvc-c" || got[4] != "pvc-e" {
		t.Fatalf("pages gave %v, want every volume once in order", got)
	}
	_, err := h.d.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "bogus"})
	grpctest.WantCode(t, err, codes.Aborted, "was not issued by this driver")
	_, err = h.d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: -1})
	grpctest.WantCode(t, err, codes.InvalidArgument, "max_entries")
}

func TestGetCapacity(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	get := func(params map[string]string, node string) (int64, int64) {
		t.Helper()
		req := &csi.GetCapacityRequest{Parameters: params, VolumeCapabilities: []*csi.VolumeCapability{mountCap()}}
		if node != "" {
			req.AccessibleTopology = &csi.Topology{Segments: map[string]string{contract.TopologyKey: node}}
		}
		resp, err := h.d.GetCapacity(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetAvailableCapacity(), resp.GetMaximumVolumeSize().GetValue()
	}
	if avail, max := get(map[string]string{contract.ParamStoragePool: "fast"}, testNode); avail != 512<<20 || max != avail {
		t.Fatalf("fast: available %d max %d, want 512 MiB both", avail, max)
	}
	if avail, _ := get(map[string]string{contract.ParamStoragePool: "fast"}, "node-b"); avail != 0 {
		t.Fatalf("another node's segment: %d, want 0", avail)
	}
	if avail, _ := get(map[string]string{contract.ParamStoragePool: "missing"}, testNode); avail != 0 {
		t.Fatalf("pool this node lacks: %d, want 0", avail)
	}
}

func TestGetCapacityHeadroomAndReservations(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ReservationAware = true
		editPools(c, func(p *pool.Pool) {
			if p.Name == "fast" {
				p.ReservedBytes = 100 << 20
			}
		})
	})
	ctx := context.Background()
	h.mustCreate(t, createReq("pvc-1", "fast", 50<<20))
	// 512 MiB free - 100 MiB headroom - 50 MiB requested but unwritten.
	if got := h.offered(t, "fast"); got != 362<<20 {
		t.Fatalf("available = %d MiB, want 362 MiB", got>>20)
	}
	// Once measured, what the volume wrote no longer counts as reserved.
	dir := filepath.Join(h.pools["fast"], "pvc-1")
	data := make([]byte, 20<<20)
	for i := range data {
		data[i] = 1
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-1", VolumePath: dir}); err != nil {
		t.Fatal(err)
	}
	used, err := dirvol.DirUsage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.offered(t, "fast"), int64(412<<20)-(50<<20-used.Bytes); got != want {
		t.Fatalf("available after measuring %d bytes used = %d, want %d", used.Bytes, got, want)
	}
	if _, err := h.d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if got := h.offered(t, "fast"); got != 412<<20 {
		t.Fatalf("available after DeleteVolume = %d, want 412 MiB", got)
	}
}

type fakeBinding struct {
	immediate bool
	err       error
}

func (f fakeBinding) ImmediateClass(context.Context, string, string) (string, bool, error) {
	return "local", f.immediate, f.err
}

func TestCreateVolumeRefusesImmediateStorageClass(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	req := createReq("pvc-1", "fast", 1)
	req.Parameters[paramPVCNamespace], req.Parameters[paramPVCName] = "ns", "claim"
	h.d.deps.Binding = fakeBinding{immediate: true}
	_, err := h.d.CreateVolume(ctx, req)
	grpctest.WantCode(t, err, codes.InvalidArgument, `StorageClass "local" of claim ns/claim uses volumeBindingMode Immediate`, "WaitForFirstConsumer")
	if _, err := os.Stat(filepath.Join(h.pools["fast"], "pvc-1")); !os.IsNotExist(err) {
		t.Fatalf("refused Immediate claim created a directory: %v", err)
	}
	// An API error does not stop provisioning.
	h.d.deps.Binding = fakeBinding{err: os.ErrDeadlineExceeded}
	if _, err := h.d.CreateVolume(ctx, req); err != nil {
		t.Fatalf("with the API unreachable: %v", err)
	}
}
