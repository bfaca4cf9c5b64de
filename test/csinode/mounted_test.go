package csinode

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// A pool that hpp-mounter mounts ("mounted": true) is used only while
// hpp-mounter's marker is visible: the bare mount point on the OS disk is
// never written to, and creates are refused saying why. Probe stays ready:
// the pool waits for its mounter by design, and the node's other pools
// must keep serving.
func TestMountedPoolNeedsMarker(t *testing.T) {
	host, volumes := bareMountPoint(t)
	e := newEnvPool(t, csitest.Pool{Name: poolName, Path: host, Mounted: true}, "--pool-retry-interval", "100ms")
	marker := filepath.Join(volumes, poolmarker.Name)
	why := `storage pool "p" is not ready: it is not mounted: marker ` + marker + ` is missing; hpp-mounter writes the marker once the pool's PVC is mounted there, and hpp-csi never uses the bare directory`

	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-bare", node, MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.Unavailable, why)
	if !probeReady(t, e) {
		t.Error("Probe not ready because a mounted pool waits for its mounter")
	}
	if got := csitest.Entries(t, volumes); len(got) != 0 {
		t.Errorf("bare mount point written to: %v", got)
	}

	// hpp-mounter mounts the pool and writes the marker: the pool opens.
	fs := mountTmpfs(t, volumes)
	if err := poolmarker.Ensure(fs, poolmarker.Marker{Pool: poolName}); err != nil {
		t.Fatal(err)
	}
	// The driver's runner opens the pool on its next try; wait for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-mounted", node, MiB, csitest.PoolParams(poolName)))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CreateVolume still refused 30s after the pool was mounted and marked: %v", err)
		}
	}

	// The pool is unmounted (mounter pod gone): refused again, in those words.
	if err := unix.Unmount(volumes, 0); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-after", node, MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.Unavailable, why)
	if !probeReady(t, e) {
		t.Error("Probe not ready after the mounted pool was unmounted")
	}
	if got := csitest.Entries(t, volumes); len(got) != 0 {
		t.Errorf("bare mount point written to: %v", got)
	}
}

// A marker naming another pool is the wrong PVC mounted there.
func TestMountedPoolRefusesOtherPoolsMarker(t *testing.T) {
	host, volumes := bareMountPoint(t)
	if err := poolmarker.Ensure(mountTmpfs(t, volumes), poolmarker.Marker{Pool: "other"}); err != nil {
		t.Fatal(err)
	}
	e := newEnvPool(t, csitest.Pool{Name: poolName, Path: host, Mounted: true})
	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-x", node, MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.Unavailable, `storage pool "p" is not ready: it is not mounted: marker `+filepath.Join(volumes, poolmarker.Name)+` belongs to pool "other", not "p"`)
}

// bareMountPoint is a host pool directory whose volumes directory is an
// empty mount point, as hpp-mounter leaves it when the pool is not mounted.
func bareMountPoint(t *testing.T) (host, volumes string) {
	t.Helper()
	testutil.RequireRoot(t)
	host = t.TempDir()
	volumes = filepath.Join(host, csitest.VolumesSubdir)
	if err := os.Mkdir(volumes, 0o755); err != nil {
		t.Fatal(err)
	}
	return host, volumes
}

// mountTmpfs mounts a tmpfs on dir (the pool's storage); cleanup unmounts it
// unless the test did.
func mountTmpfs(t *testing.T, dir string) string {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		for {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				return
			}
		}
	})
	return dir
}
