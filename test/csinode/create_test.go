package csinode

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// onlyHidden fails unless the pool's csi directory holds nothing but hpp's
// private areas: no volume was made.
func onlyHidden(t *testing.T, e *env) {
	t.Helper()
	for _, n := range csitest.Entries(t, filepath.Join(e.pool, "csi")) {
		if n[0] != '.' {
			t.Errorf("unexpected volume directory %q in the pool", n)
		}
	}
	if left := csitest.Entries(t, filepath.Join(e.pool, "csi", csitest.RecordsDir)); len(left) != 0 {
		t.Errorf("unexpected meta files: %v", left)
	}
}

func TestCreateVolumeResponse(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	v := e.create("pvc-resp", 5*MiB, nil)
	// The request, not the pool's size, and this node only.
	if len(v.GetAccessibleTopology()) != 1 || !proto.Equal(v.GetAccessibleTopology()[0], csitest.Segment(node)) {
		t.Errorf("accessible_topology = %v; want exactly this node", v.GetAccessibleTopology())
	}
	if v.GetVolumeContext()[contract.ParamStoragePool] != poolName {
		t.Errorf("volume_context = %v; want the pool named", v.GetVolumeContext())
	}
	fi, err := os.Stat(e.volDir("pvc-resp"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o777 || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("default volume directory: mode %v owner %d:%d; want 0777 root:root as the KubeVirt driver made", fi.Mode().Perm(), st.Uid, st.Gid)
	}
	if meta := e.readMeta("pvc-resp"); meta["capacityBytes"] != float64(5*MiB) || meta["kind"] != "persistent" {
		t.Errorf("meta = %v; want capacityBytes %d, kind persistent", meta, 5*MiB)
	}
	// Idempotent: the same request again is the same volume.
	again := e.create("pvc-resp", 5*MiB, nil)
	if !proto.Equal(again, v) {
		t.Errorf("repeated CreateVolume = %v; want %v", again, v)
	}
	// Same name, incompatible size: AlreadyExists.
	_, err = e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-resp", node, 6*MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.AlreadyExists, "pvc-resp", "5242880")
}

// Only WaitForFirstConsumer is supported: no topology (Immediate binding)
// and another node's topology are refused, and nothing is created.
func TestCreateVolumeTopology(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	req := csitest.CreateRequest("pvc-immediate", node, MiB, csitest.PoolParams(poolName))
	req.AccessibilityRequirements = nil
	_, err := e.c.CreateVolume(ctx(t), req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "accessibility_requirements", "WaitForFirstConsumer")

	req = csitest.CreateRequest("pvc-elsewhere", "node-b", MiB, csitest.PoolParams(poolName))
	_, err = e.c.CreateVolume(ctx(t), req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "node-b", `not this node "`+node+`"`)
	onlyHidden(t, e)
}

func TestCreateVolumeBlockRefused(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	req := csitest.CreateRequest("pvc-block", node, MiB, csitest.PoolParams(poolName))
	req.VolumeCapabilities = []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	_, err := e.c.CreateVolume(ctx(t), req)
	grpctest.WantCode(t, err, codes.InvalidArgument, "block access is not supported", "hostpath volumes are filesystem volumes")
	onlyHidden(t, e)
}

// directoryUID/GID/Mode are applied on disk, so a non-root pod with that
// uid can write through the mount and another uid cannot.
func TestCreateVolumeDirectoryOwnership(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	v := e.create("pvc-owned", MiB, map[string]string{
		csitest.DirectoryUID: "1234", csitest.DirectoryGID: "5678", csitest.DirectoryMode: "0750",
	})
	fi, err := os.Stat(e.volDir("pvc-owned"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 5678 || fi.Mode().Perm() != 0o750 {
		t.Fatalf("volume directory: owner %d:%d mode %v; want 1234:5678 0750", st.Uid, st.Gid, fi.Mode().Perm())
	}

	target := filepath.Join(t.TempDir(), "mount")
	// The test's temporary directories are 0700; the pod's uid must reach
	// the target as kubelet's pod directories allow.
	if err := os.Chmod(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(filepath.Dir(target)); p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.publish(csitest.PublishRequest(v.GetVolumeId(), target, v.GetVolumeContext()))
	defer e.unpublish("pvc-owned", target)

	write := func(uid, gid uint32, name string) error {
		cmd := exec.CommandContext(ctx(t), "/bin/sh", "-c", `echo data > "$1"`, "sh", filepath.Join(target, name))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(string(out))
		}
		return nil
	}
	if err := write(1234, 1234, "by-owner"); err != nil {
		t.Errorf("uid 1234 (the directoryUID) cannot write to its volume: %v", err)
	}
	if err := write(4321, 5678, "by-group"); err == nil {
		t.Errorf("gid 5678 wrote to a 0750 volume; the group must have no write access")
	}
	if err := write(4321, 4321, "by-other"); err == nil {
		t.Errorf("uid 4321 wrote to a 0750 volume owned by 1234:5678")
	}
	if fi, err := os.Stat(filepath.Join(e.volDir("pvc-owned"), "by-owner")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1234 {
		t.Errorf("file written by uid 1234: %v", err)
	}
}

// Bad StorageClass parameters are refused together, each named.
func TestCreateVolumeBadParameters(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-bad-params", node, MiB, map[string]string{
		contract.ParamStoragePool: poolName, csitest.DirectoryMode: "0644", csitest.DirectoryUID: "-1", "storagepool": poolName,
	}))
	grpctest.WantCode(t, err, codes.InvalidArgument, "parameters.directoryMode", `"0644"`, "parameters.directoryUID", `"-1"`,
		"parameters.storagepool: unknown parameter")
	_, err = e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-no-pool", node, MiB, csitest.PoolParams("nosuchpool")))
	grpctest.WantCode(t, err, codes.InvalidArgument, "nosuchpool")
	onlyHidden(t, e)
}
