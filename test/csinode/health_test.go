package csinode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

type healthEntry struct {
	status, reason, message string
}

func (h healthEntry) String() string { return h.status + "/" + h.reason + ": " + h.message }

func volumeHealth(t *testing.T, e *env, id string) []healthEntry {
	t.Helper()
	resp, err := e.c.ControllerGetVolumeHealth(ctx(t), &csi.ControllerGetVolumeHealthRequest{VolumeId: id})
	if err != nil {
		t.Fatalf("ControllerGetVolumeHealth %q: %v", id, err)
	}
	return toEntries(resp.GetVolumeHealth())
}

func nodeVolumeHealth(t *testing.T, e *env, id string) []healthEntry {
	t.Helper()
	resp, err := e.c.NodeGetVolumeHealth(ctx(t), &csi.NodeGetVolumeHealthRequest{VolumeId: id})
	if err != nil {
		t.Fatalf("NodeGetVolumeHealth %q: %v", id, err)
	}
	return toEntries(resp.GetVolumeHealth())
}

func toEntries(h *csi.VolumeHealth) []healthEntry {
	var out []healthEntry
	for _, s := range h.GetHealthStatuses() {
		out = append(out, healthEntry{s.GetStatus().String(), s.GetReason(), s.GetMessage()})
	}
	return out
}

func storageHealth(t *testing.T, e *env) []healthEntry {
	t.Helper()
	resp, err := e.c.NodeGetStorageHealth(ctx(t), &csi.NodeGetStorageHealthRequest{})
	if err != nil {
		t.Fatalf("NodeGetStorageHealth: %v", err)
	}
	var out []healthEntry
	for _, b := range resp.GetBackendHealth() {
		out = append(out, healthEntry{b.GetStatus().String(), b.GetReason(), b.GetMessage()})
	}
	return out
}

// wantOne fails unless got is exactly one entry with status and reason whose
// message mentions every part.
func wantOne(t *testing.T, what string, got []healthEntry, status, reason string, parts ...string) {
	t.Helper()
	if len(got) != 1 || got[0].status != status || got[0].reason != reason {
		t.Errorf("%s = %v; want exactly one %s/%s", what, got, status, reason)
		return
	}
	for _, p := range parts {
		if !strings.Contains(got[0].message, p) {
			t.Errorf("%s message %q does not mention %q", what, got[0].message, p)
		}
	}
}

func probeReady(t *testing.T, e *env) bool {
	t.Helper()
	resp, err := e.c.Probe(ctx(t), &csi.ProbeRequest{})
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return resp.GetReady().GetValue()
}

func TestHealthVolumeDirectoryMissing(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	e.create("pvc-healthy", MiB, nil)
	e.create("pvc-gone", MiB, nil)
	if got := volumeHealth(t, e, "pvc-gone"); len(got) != 0 {
		t.Fatalf("health of a fine volume = %v; want no entries", got)
	}
	// Removed behind the driver's back.
	if err := os.RemoveAll(e.volDir("pvc-gone")); err != nil {
		t.Fatal(err)
	}
	wantOne(t, "ControllerGetVolumeHealth", volumeHealth(t, e, "pvc-gone"), "INACCESSIBLE", "VolumeDirectoryMissing", e.volDir("pvc-gone"))
	wantOne(t, "NodeGetVolumeHealth", nodeVolumeHealth(t, e, "pvc-gone"), "INACCESSIBLE", "VolumeDirectoryMissing", e.volDir("pvc-gone"))

	list, err := e.c.ControllerListVolumeHealth(ctx(t), &csi.ControllerListVolumeHealthRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetVolumeId() != "pvc-gone" {
		t.Fatalf("ControllerListVolumeHealth = %v; want only pvc-gone (healthy volumes are not listed)", list.GetEntries())
	}
	wantOne(t, "ControllerListVolumeHealth", toEntries(list.GetEntries()[0]), "INACCESSIBLE", "VolumeDirectoryMissing")
	if got := volumeHealth(t, e, "pvc-healthy"); len(got) != 0 {
		t.Errorf("health of the other volume = %v; want none", got)
	}
	if !probeReady(t, e) {
		t.Errorf("Probe not ready because one volume directory is gone; the pool is fine")
	}
}

// fillUntilENOSPC writes into dir until the filesystem says ENOSPC.
func fillUntilENOSPC(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = 'x'
	}
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the pool: %v; want ENOSPC in the end", err)
			}
			return
		}
	}
}

func TestHealthPoolFull(t *testing.T) {
	poolPath := csitest.Tmpfs(t, 8*MiB, 0)
	e := newEnv(t, poolPath)
	e.create("pvc-full", 0, nil)
	fillUntilENOSPC(t, e.volDir("pvc-full"))

	wantOne(t, "ControllerGetVolumeHealth", volumeHealth(t, e, "pvc-full"), "DEGRADED", "PoolFull", poolName, "full")
	wantOne(t, "NodeGetStorageHealth", storageHealth(t, e), "STORAGE_DEGRADED", "PoolFull", poolName)
	if !probeReady(t, e) {
		t.Errorf("Probe not ready on a full pool; existing volumes still work, the plugin must stay up")
	}
	if a, m := getCapacity(t, e, capacityRequest(node)); a != 0 || m > 0 {
		t.Errorf("GetCapacity on a full pool: available %d maximum %d; want 0", a, m)
	}
	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-more", node, MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.ResourceExhausted, poolName)

	// Freeing space clears the condition.
	if err := os.Remove(filepath.Join(e.volDir("pvc-full"), "filler")); err != nil {
		t.Fatal(err)
	}
	if got := volumeHealth(t, e, "pvc-full"); len(got) != 0 {
		t.Errorf("health after freeing space = %v; want none", got)
	}
}

func TestHealthPoolOutOfInodes(t *testing.T) {
	poolPath := csitest.Tmpfs(t, 64*MiB, 64)
	e := newEnv(t, poolPath)
	e.create("pvc-inodes", 0, nil)
	var i int
	for i = 0; ; i++ {
		f, err := os.Create(filepath.Join(e.volDir("pvc-inodes"), fmt.Sprintf("f%d", i)))
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		if i > 1000 {
			t.Fatal("tmpfs nr_inodes=64 did not run out of inodes")
		}
	}
	t.Logf("pool ran out of inodes after %d files", i)
	wantOne(t, "ControllerGetVolumeHealth", volumeHealth(t, e, "pvc-inodes"), "DEGRADED", "PoolOutOfInodes", poolName, "no free inodes")
	wantOne(t, "NodeGetStorageHealth", storageHealth(t, e), "STORAGE_DEGRADED", "PoolOutOfInodes", poolName)
}

// bindPool bind mounts a fresh tmpfs at a pool directory, so the test can
// take the pool's mount away and bring the same filesystem back.
func bindPool(t *testing.T) (fsDir, poolPath string) {
	t.Helper()
	fsDir = csitest.Tmpfs(t, 64*MiB, 0)
	poolPath = filepath.Join(t.TempDir(), "pool")
	if err := os.Mkdir(poolPath, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(fsDir, poolPath, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m, _ := csitest.MountsAt(poolPath); len(m) > 0 {
			_ = unix.Unmount(poolPath, unix.MNT_DETACH)
		}
	})
	return fsDir, poolPath
}

// The pool's filesystem is unmounted while the driver runs: the pool
// directory is now on the host's root disk. Every health RPC says so, Probe
// says not ready, and nothing treats the pool's volumes as deleted.
func TestHealthPoolMountLost(t *testing.T) {
	fsDir, poolPath := bindPool(t)
	e := newEnv(t, poolPath)
	e.create("pvc-lost", MiB, nil)
	if !probeReady(t, e) {
		t.Fatal("Probe not ready before the mount was lost")
	}
	if err := unix.Unmount(poolPath, 0); err != nil {
		t.Fatalf("unmounting the pool: %v", err)
	}

	wantOne(t, "NodeGetStorageHealth", storageHealth(t, e), "STORAGE_UNREACHABLE", "PoolMountLost", poolName, poolPath)
	if probeReady(t, e) {
		t.Errorf("Probe ready although the pool's mount is gone")
	}
	t.Run("volume health", func(t *testing.T) {
		wantOne(t, "ControllerGetVolumeHealth", volumeHealth(t, e, "pvc-lost"), "INACCESSIBLE", "PoolMountLost", poolName)
	})
	t.Run("list volume health still answers", func(t *testing.T) {
		// The lost pool's volumes cannot be listed, but the call must not
		// fail for every pool because of one.
		if _, err := e.c.ControllerListVolumeHealth(ctx(t), &csi.ControllerListVolumeHealthRequest{}); err != nil {
			t.Errorf("ControllerListVolumeHealth: %v", err)
		}
	})
	t.Run("delete does not report success", func(t *testing.T) {
		// The volume is on the disk that is gone; "deleted" would let
		// the CO drop the PV and leak the data when the disk returns.
		_, err := e.c.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-lost"})
		grpctest.WantCode(t, err, codes.Unavailable, poolName)
	})
	t.Run("publish does not say the volume is gone", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "mount")
		_, err := e.c.NodePublishVolume(ctx(t), csitest.PublishRequest("pvc-lost", target, csitest.PoolParams(poolName)))
		grpctest.WantCode(t, err, codes.Unavailable, poolName)
	})
	t.Run("create does not write to the host disk", func(t *testing.T) {
		_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-new", node, MiB, csitest.PoolParams(poolName)))
		grpctest.WantCode(t, err, codes.Unavailable, poolName)
		if left := csitest.Entries(t, poolPath); len(left) != 0 {
			t.Errorf("the unmounted pool directory on the host disk got %v", left)
		}
	})

	// The same filesystem comes back: healthy again, the volume intact.
	if err := unix.Mount(fsDir, poolPath, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if got := storageHealth(t, e); len(got) != 0 {
		t.Errorf("storage health after the mount returned = %v; want none", got)
	}
	if !probeReady(t, e) {
		t.Errorf("Probe not ready after the mount returned")
	}
	if _, err := os.Stat(e.volDir("pvc-lost")); err != nil {
		t.Errorf("volume after the mount returned: %v", err)
	}
}

// A pool whose host directory is missing (its disk not mounted yet) keeps
// the driver not-ready; the driver never creates it, and once it appears
// makes the volumes directory in it and becomes ready.
func TestProbeNotReadyWhenPoolMissing(t *testing.T) {
	base := csitest.Tmpfs(t, 64*MiB, 0)
	ready := csitest.Pool{Name: "ready", Path: filepath.Join(base, "ready")}
	late := csitest.Pool{Name: "late", Path: filepath.Join(base, "late")}
	if err := os.Mkdir(ready.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	d := csitest.Start(t, node, []csitest.Pool{ready, late}, "--health-address", "127.0.0.1:0", "--pool-retry-interval=50ms")
	e := &env{t: t, d: d, c: d.Client(t), pool: ready.Path}

	if probeReady(t, e) {
		t.Errorf("Probe ready although pool %q's directory %s is missing", late.Name, late.Path)
	}
	wantOne(t, "NodeGetStorageHealth", storageHealth(t, e), "STORAGE_UNREACHABLE", "PoolPathMissing", late.Path)
	code, body := httpGet(t, d, "health", "/healthz")
	if code != 503 || !strings.Contains(body, late.Path) {
		t.Errorf("/healthz = %d %q; want 503 naming %s", code, body, late.Path)
	}
	mustNotExist(t, late.Path)
	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-late", node, MiB, csitest.PoolParams(late.Name)))
	grpctest.WantCode(t, err, codes.Unavailable, late.Name)
	// The other pool serves meanwhile.
	if _, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-ready", node, MiB, csitest.PoolParams(ready.Name))); err != nil {
		t.Errorf("CreateVolume on the ready pool: %v", err)
	}

	if err := os.Mkdir(late.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	// The driver's runner opens the pool on its next try (read paths
	// never do); wait for it.
	for deadline := time.Now().Add(30 * time.Second); !probeReady(t, e); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Probe not ready 30s after pool %q's directory appeared", late.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(late.Path, csitest.VolumesSubdir)); err != nil {
		t.Errorf("volumes directory of the pool that appeared: %v", err)
	}
	if code, body := httpGet(t, d, "health", "/healthz"); code != 200 {
		t.Errorf("/healthz = %d %q; want 200", code, body)
	}
	if _, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-late", node, MiB, csitest.PoolParams(late.Name))); err != nil {
		t.Errorf("CreateVolume on the pool once it appeared: %v", err)
	}
}
