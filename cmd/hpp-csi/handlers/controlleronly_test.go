package handlers

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools/poolstest"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

// serveControllerOnly serves a --controller-only driver on a real unix
// socket, as csi-resizer reaches it, and returns a connection to it.
func serveControllerOnly(t *testing.T) *grpc.ClientConn {
	t.Helper()
	// A short directory: a unix socket path has ~108 bytes.
	dir, err := os.MkdirTemp("", "hpp-ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cfg := Config{DriverName: contract.DriverName, VendorVersion: "v9", ControllerOnly: true, Config: pools.Config{StatsTimeout: time.Second}}
	mounter := poolstest.NewMounter()
	rt, err := pools.New(cfg.Config, pools.Deps{Mounter: mounter, Labeler: &poolstest.Labeler{}, FS: poolstest.NewFS(mounter)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, rt, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	done := make(chan error, 1)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := d.NewGRPCServer()
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.GracefulStop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// Wait for the socket.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return conn
}

func TestControllerOnlyServesExpansionOnly(t *testing.T) {
	conn := serveControllerOnly(t)
	ctx := context.Background()
	id, ctl, node := csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn)

	info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != contract.DriverName || info.GetVendorVersion() != "v9" {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	probe, err := id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		t.Fatalf("Probe = %v, %v; want ready (nothing to open)", probe, err)
	}
	caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var service, online, topology bool
	for _, c := range caps.GetCapabilities() {
		service = service || c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE
		topology = topology || c.GetService().GetType() == csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS
		online = online || c.GetVolumeExpansion().GetType() == csi.PluginCapability_VolumeExpansion_ONLINE
	}
	if !service || !online || topology {
		t.Fatalf("plugin capabilities %v: want CONTROLLER_SERVICE and ONLINE expansion, no topology", caps)
	}
	ccaps, err := ctl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var rpcs []csi.ControllerServiceCapability_RPC_Type
	for _, c := range ccaps.GetCapabilities() {
		rpcs = append(rpcs, c.GetRpc().GetType())
	}
	if len(rpcs) != 2 || rpcs[0] != csi.ControllerServiceCapability_RPC_EXPAND_VOLUME || rpcs[1] != csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER {
		t.Fatalf("controller capabilities %v, want EXPAND_VOLUME and SINGLE_NODE_MULTI_WRITER only", rpcs)
	}

	// The size asked for, the rest left to the node; the same again.
	for range 2 {
		resp, err := ctl.ControllerExpandVolume(ctx, expandReq("pvc-1", 300<<20))
		if err != nil || resp.GetCapacityBytes() != 300<<20 || !resp.GetNodeExpansionRequired() {
			t.Fatalf("ControllerExpandVolume = %v, %v; want 300 MiB and NodeExpansionRequired", resp, err)
		}
	}
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-1"})
	grpctest.WantCode(t, err, codes.InvalidArgument, "capacity_range: required")
	_, err = ctl.ControllerExpandVolume(ctx, expandReq("../x", 1<<20))
	grpctest.WantCode(t, err, codes.InvalidArgument, "volume_id")

	// Nothing else is served: no provisioning, no node.
	_, err = ctl.CreateVolume(ctx, createReq("pvc-2", "fast", 1<<20))
	grpctest.WantCode(t, err, codes.Unimplemented)
	_, err = ctl.GetCapacity(ctx, &csi.GetCapacityRequest{})
	grpctest.WantCode(t, err, codes.Unimplemented)
	_, err = node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	grpctest.WantCode(t, err, codes.Unimplemented)
}

func TestControllerOnlyNeedsNoNodeOrPools(t *testing.T) {
	cfg := Config{DriverName: contract.DriverName, Config: pools.Config{StatsTimeout: time.Second}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("a node driver without --nodeid and --datadir validated")
	}
	cfg.ControllerOnly = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("controller-only: %v", err)
	}
}
