// Package csinode holds the node tests of hpp-csi: the real binary over its
// real unix socket, with real bind mounts on real filesystems (a directory on
// the host's disk, tmpfs, XFS on a loop device). Every test needs root and
// skips, with the reason, without it.
package csinode

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const (
	node     = csitest.DefaultNodeName
	poolName = "p"
	MiB      = int64(1 << 20)
)

// env is one driver serving one pool.
type env struct {
	t    *testing.T
	d    *csitest.Driver
	c    *csitest.Client
	pool string // the pool's path
}

// newEnv starts hpp-csi with one pool at poolPath (made if missing).
func newEnv(t *testing.T, poolPath string, extra ...string) *env {
	t.Helper()
	return newEnvPool(t, csitest.Pool{Name: poolName, Path: poolPath}, extra...)
}

func newEnvPool(t *testing.T, p csitest.Pool, extra ...string) *env {
	t.Helper()
	testutil.RequireRoot(t)
	if err := os.MkdirAll(p.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	d := csitest.Start(t, node, []csitest.Pool{p}, extra...)
	return &env{t: t, d: d, c: d.Client(t), pool: p.Path}
}

// ctx bounds each call; a hung driver fails the test instead of stalling.
func ctx(t *testing.T) context.Context { return csitest.Ctx(t) }

func (e *env) volDir(id string) string {
	return filepath.Join(e.pool, csitest.VolumesSubdir, id)
}

// hasRecord reports whether volume id has a record, in either form.
func (e *env) hasRecord(id string) bool {
	_, err := csitest.ReadRecord(filepath.Join(e.pool, csitest.VolumesSubdir), id)
	return err == nil
}

// create makes a volume of size bytes in the pool and checks the answer.
func (e *env) create(name string, size int64, params map[string]string) *csi.Volume {
	e.t.Helper()
	if params == nil {
		params = map[string]string{}
	}
	if _, ok := params[contract.ParamStoragePool]; !ok {
		params[contract.ParamStoragePool] = poolName
	}
	resp, err := e.c.CreateVolume(ctx(e.t), csitest.CreateRequest(name, node, size, params))
	if err != nil {
		e.t.Fatalf("CreateVolume %q: %v", name, err)
	}
	v := resp.GetVolume()
	if v.GetVolumeId() != name || v.GetCapacityBytes() != size {
		e.t.Fatalf("CreateVolume %q = id %q capacity %d; want id %q capacity %d", name, v.GetVolumeId(), v.GetCapacityBytes(), name, size)
	}
	return v
}

func (e *env) publish(req *csi.NodePublishVolumeRequest) {
	e.t.Helper()
	if _, err := e.c.NodePublishVolume(ctx(e.t), req); err != nil {
		e.t.Fatalf("NodePublishVolume %q at %s: %v", req.GetVolumeId(), req.GetTargetPath(), err)
	}
}

func (e *env) unpublish(id, target string) {
	e.t.Helper()
	if _, err := e.c.NodeUnpublishVolume(ctx(e.t), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		e.t.Fatalf("NodeUnpublishVolume %q at %s: %v", id, target, err)
	}
}

// readMeta returns the volume's meta file as a map.
func (e *env) readMeta(id string) map[string]any {
	e.t.Helper()
	data, err := csitest.ReadRecord(filepath.Join(e.pool, csitest.VolumesSubdir), id)
	if err != nil {
		e.t.Fatalf("meta file of %q: %v", id, err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(data, &m); err != nil {
		e.t.Fatalf("meta file of %q: %v", id, err)
	}
	return m
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: want it gone, Lstat = %v", path, err)
	}
}

// mounted returns the mounts at target, failing the test on read errors.
func mounted(t *testing.T, target string) []csitest.MountEntry {
	t.Helper()
	m, err := csitest.MountsAt(target)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// poolKind is a filesystem a pool can live on.
type poolKind struct {
	name string
	make func(t *testing.T) string
}

// poolKinds are the filesystems the lifecycle tests run on: a directory on
// the host's disk, a tmpfs, and XFS on a loop device (skipped with the
// reason where mkfs.xfs or loop devices are missing).
var poolKinds = []poolKind{
	{"hostdir", func(t *testing.T) string { return filepath.Join(t.TempDir(), "pool") }},
	{"tmpfs", func(t *testing.T) string { return csitest.Tmpfs(t, 256*MiB, 0) }},
	{"xfs", func(t *testing.T) string { return testutil.LoopXFS(t, testutil.MinXFSBytes) }},
}

func forEachPoolKind(t *testing.T, f func(t *testing.T, poolPath string)) {
	testutil.RequireRoot(t)
	for _, k := range poolKinds {
		t.Run(k.name, func(t *testing.T) { f(t, k.make(t)) })
	}
}

// statfs returns available bytes and free inodes of the filesystem at path,
// computed the way df does.
func statfs(t *testing.T, path string) (avail, freeInodes int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	unit := st.Frsize
	if unit == 0 {
		unit = st.Bsize
	}
	return int64(st.Bavail) * unit, int64(st.Ffree)
}

// between reports whether v lies between a and b (in either order): figures
// of a filesystem that others may write to are bracketed by two reads.
func between(v, a, b int64) bool {
	return min(a, b) <= v && v <= max(a, b)
}

// writeFile writes n bytes of non-zero data and syncs, so the blocks are
// really allocated (not a sparse hole, not a delayed allocation).
func writeFile(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte(strings.Repeat("hpp-", int(n/4)+1))[:n]
	if _, err := f.Write(buf); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
