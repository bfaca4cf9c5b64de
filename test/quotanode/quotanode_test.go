package quotanode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const (
	MiB      = 1 << 20
	poolName = "q"
	nodeID   = "quota-node"
	firstID  = 100
	lastID   = 131
)

var kernel = prjquota.NewLinux()

// unavailable ends a test whose kernel or tools cannot give project quotas:
// a skip with the measured reason, except in the VM tier under CI=true.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" && inVMTier() {
		t.Fatalf("project quotas unavailable in the VM tier (HPP_QUOTA_TIER=vm): %s", reason)
	}
	t.Skipf("skipping: project quotas unavailable here: %s", reason)
}

// inVMTier reports whether this runs in the tier made for it: the quota
// VM (hack/quotavm.sh lays out /quotavm/) or HPP_QUOTA_TIER=vm.
func inVMTier() bool {
	if os.Getenv("HPP_QUOTA_TIER") == "vm" {
		return true
	}
	_, err := os.Stat("/quotavm/tests")
	return err == nil
}

// driverBinary is the hpp_killpoints build of hpp-csi: $HPP_CSI_BIN, else a
// file named hpp-csi beside the test binary (copied and made executable:
// the VM runner runs every executable file beside it as a test), else
// built from this checkout.
func driverBinary(t testing.TB) string {
	t.Helper()
	if os.Getenv("HPP_CSI_BIN") == "" {
		if self, err := os.Executable(); err == nil {
			beside := filepath.Join(filepath.Dir(self), "hpp-csi")
			if data, err := os.ReadFile(beside); err == nil {
				bin := filepath.Join(t.TempDir(), "hpp-csi")
				if err := os.WriteFile(bin, data, 0o755); err != nil {
					t.Fatal(err)
				}
				return bin
			}
		}
	}
	bin, err := csitest.BuildKillpointsBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// quotaFS makes a 512 MiB filesystem of kind on a loop device with project
// quotas enforced and returns its mount point, or skips saying what the
// kernel or tools refused.
func quotaFS(t testing.TB, kind string) string {
	t.Helper()
	var features []string
	if kind == "ext4" {
		features = []string{"-O", "project,quota"}
	}
	mnt := loopFS(t, kind, features, "prjquota")
	if err := prjquota.Check(kernel, mnt); err != nil {
		unavailable(t, "mounted with prjquota, but: %v", err)
	}
	return mnt
}

// loopFS makes a 512 MiB filesystem of kind (mkfs with extra args) on a
// loop device, mounts it with opts and returns the mount point.
func loopFS(t testing.TB, kind string, mkfsArgs []string, opts string) string {
	t.Helper()
	testutil.RequireRoot(t)
	mkfs := map[string][]string{
		"xfs":  {"mkfs.xfs", "-q", "-f"},
		"ext4": {"mkfs.ext4", "-q", "-F"},
	}[kind]
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		testutil.MissingPrerequisite(t, "%s not found (%v); install xfsprogs and e2fsprogs", mkfs[0], err)
	}
	// 512 MiB: in the VM the image lives in memory.
	dev, _ := testutil.LoopDevice(t, 512*MiB)
	args := append(append(mkfs[1:len(mkfs):len(mkfs)], mkfsArgs...), dev)
	if _, err := testutil.Run(context.Background(), mkfs[0], args...); err != nil {
		unavailable(t, "%v", err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dev, mnt, kind, 0, opts); err != nil {
		unavailable(t, "mount -t %s -o %q %s: %v (the kernel logs why, e.g. \"quota support not available in this kernel\")", kind, opts, dev, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	return mnt
}

// startEnforcingDriver runs hpp-csi with one pool at mnt that enforces
// sizes with project quotas (IDs firstID..lastID) and takes reflink snapshots.
func startEnforcingDriver(t *testing.T, mnt string) *csitest.Driver {
	t.Helper()
	return launchDriver(t, []csitest.Pool{{Name: poolName, Path: mnt, EnforceSize: true, SnapshotProvider: "reflink",
		ProjectIDs: map[string]uint32{"first": firstID, "last": lastID}}})
}

// launchDriver runs the hpp_killpoints hpp-csi with pools and extra flags;
// it is stopped at the test's end, its log printed if the test failed.
func launchDriver(tb testing.TB, pools []csitest.Pool, extra ...string) *csitest.Driver {
	tb.Helper()
	d, err := csitest.Launch(driverBinary(tb), csitest.Config{NodeID: nodeID, Dir: tb.TempDir(), LogLevel: "info", Pools: pools, Extra: extra})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = d.Stop()
		if tb.Failed() {
			tb.Logf("hpp-csi log:\n%s", d.Log())
		}
	})
	return d
}

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func createRequest(id string, size int64) *csi.CreateVolumeRequest {
	topo := &csi.Topology{Segments: map[string]string{contract.TopologyKey: nodeID}}
	return &csi.CreateVolumeRequest{
		Name: id, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		Parameters:                map[string]string{contract.ParamStoragePool: poolName},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo}, Preferred: []*csi.Topology{topo}},
	}
}

func createVolume(ctx context.Context, c *csitest.Client, id string, size int64) error {
	_, err := c.CreateVolume(ctx, createRequest(id, size))
	return err
}

// publish bind-mounts volume id where a writer running as nobody reaches
// it (the directories above the target let it through) and returns the
// target; it is unpublished at the test's cleanup if still mounted.
func publish(t *testing.T, c *csitest.Client, id string) string {
	t.Helper()
	base := t.TempDir()
	for _, dir := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(base, "target")
	if _, err := c.NodePublishVolume(t.Context(), &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{contract.ParamStoragePool: poolName}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	})
	return target
}

func unpublish(t *testing.T, c *csitest.Client, id, target string) {
	t.Helper()
	if _, err := c.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
}

// expandVolume is what csi-resizer and kubelet do: the controller call,
// then the node call when asked for.
func expandVolume(ctx context.Context, c *csitest.Client, id, volumePath string, size int64) error {
	r, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: mountCap()})
	if err != nil {
		return err
	}
	if !r.GetNodeExpansionRequired() {
		return fmt.Errorf("ControllerExpandVolume of an enforced volume did not ask for the node step: %v", r)
	}
	_, err = c.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: volumePath,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: mountCap()})
	return err
}

func deleteVolume(ctx context.Context, c *csitest.Client, id string) error {
	_, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	return err
}

func statfsTotal(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Frsize
}

func TestEnforcedSize(t *testing.T) {
	for _, kind := range []string{"xfs", "ext4"} {
		t.Run(kind, func(t *testing.T) {
			mnt := quotaFS(t, kind)
			d := startEnforcingDriver(t, mnt)
			t.Run("limit statfs online expansion delete", func(t *testing.T) { testLifecycle(t, d, mnt, kind) })
			t.Run("snapshot restore clone own IDs", func(t *testing.T) { testCopies(t, d, mnt, kind) })
			t.Run("adopted directory unenforced until expanded", func(t *testing.T) { testAdopted(t, d, mnt, kind) })
			t.Run("SIGKILL after every step", func(t *testing.T) { testKills(t, d, mnt) })
		})
	}
}

// quotaErrno is what a write past a project's limit fails with: ext4
// says EDQUOT ("Disk quota exceeded"); XFS says ENOSPC ("No space left on
// device") for project quotas, as it always has (a project is a directory
// tree, which it reports like a full filesystem).
var quotaErrno = map[string]syscall.Errno{"xfs": syscall.ENOSPC, "ext4": syscall.EDQUOT}

func testLifecycle(t *testing.T, d *csitest.Driver, mnt, kind string) {
	ctx := t.Context()
	c := d.Client(t)
	freeBefore := freeBytes(t, mnt)
	const id = "pvc-limit"
	if err := createVolume(ctx, c, id, 100*MiB); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = deleteVolume(context.Background(), c, id)
		}
	})
	// The writer runs as nobody, as a pod does.
	target := publish(t, c, id)
	if got := statfsTotal(t, target); got != 100*MiB {
		t.Errorf("statfs inside the volume: %d bytes, want the volume's 100 MiB (%d)", got, 100*MiB)
	}
	t.Logf("statfs inside the 100 MiB volume: %d bytes", statfsTotal(t, target))
	w := startWriter(t, filepath.Join(target, "data"))
	if n, errno := w.do("write 99"); errno != 0 {
		t.Fatalf("writing 99 MiB into a 100 MiB volume: %d bytes, then %v", n, errno)
	}
	n, errno := w.do("write 2")
	if errno == 0 {
		_, errno = w.do("sync")
	}
	if want := quotaErrno[kind]; errno != want || n >= 2*MiB {
		t.Fatalf("writing past 100 MiB: %d more bytes after 99 MiB, error %v; want %v (%d) before the 101st MiB ends", n, errno, want, int(want))
	}
	t.Logf("the write past the size failed after %d bytes: %v", 99*MiB+n, errno)

	// Online: the writer keeps its file open across the expansion.
	if _, errno := w.do("truncate"); errno != 0 {
		t.Fatal(errno)
	}
	if err := expandVolume(ctx, c, id, target, 300*MiB); err != nil {
		t.Fatal(err)
	}
	if got := statfsTotal(t, target); got != 300*MiB {
		t.Errorf("statfs after expanding to 300 MiB: %d bytes", got)
	}
	t.Logf("statfs after the online expansion to 300 MiB: %d bytes", statfsTotal(t, target))
	if n, errno := w.do("write 250"); errno != 0 {
		t.Fatalf("after the expansion to 300 MiB, a 250 MiB write through the open file: %d bytes, then %v", n, errno)
	}
	if _, errno := w.do("sync"); errno != 0 {
		t.Fatalf("fsync of the 250 MiB write: %v", errno)
	}
	t.Logf("after the expansion, 250 MiB written and synced through the file kept open")
	volDir := filepath.Join(mnt, csitest.VolumesSubdir, id)
	qid, inherit, err := kernel.Project(volDir)
	if err != nil || !inherit || qid < firstID || qid > lastID {
		t.Fatalf("volume directory project %d inherit %v (%v); want an ID in %d-%d with the inherit flag", qid, inherit, err, firstID, lastID)
	}
	q, err := kernel.Quota(mnt, qid)
	if err != nil || q.UsedBytes < 250*MiB || q.HardBytes != 300*MiB {
		t.Fatalf("project %d: %+v (%v); want 250 MiB used of a 300 MiB limit", qid, q, err)
	}
	stats, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 300*MiB || stats.GetUsage()[0].GetUsed() != q.UsedBytes {
		t.Fatalf("NodeGetVolumeStats = %v, %v; want total 300 MiB and the quota's %d bytes used", stats, err, q.UsedBytes)
	}
	w.stop()

	unpublish(t, c, id, target)
	if err := deleteVolume(ctx, c, id); err != nil {
		t.Fatal(err)
	}
	deleted = true
	waitFor(t, "the ID and the blocks freed", func() error {
		if _, err := os.Lstat(filepath.Join(mnt, csitest.VolumesSubdir, prjquota.StateDir, strconv.Itoa(int(qid)))); err == nil {
			return fmt.Errorf("project %d is still linked", qid)
		}
		if q, err := kernel.Quota(mnt, qid); err != nil || q != (prjquota.Quota{}) {
			return fmt.Errorf("project %d: %+v, %w", qid, q, err)
		}
		if free := freeBytes(t, mnt); free < freeBefore-MiB {
			return fmt.Errorf("pool free %d bytes, %d before the volume", free, freeBefore)
		}
		return nil
	})
}

func freeBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Frsize
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, what, check)
}
