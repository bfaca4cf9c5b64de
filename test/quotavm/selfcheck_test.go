//go:build linux

package quotavm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

const (
	imageBytes = 300 << 20 // mkfs.xfs's smallest filesystem; ext4 takes it too
	limitBytes = 10 << 20
	projectID  = 4242
)

// The tier's self-check: on a fresh loop device of each filesystem, mounted
// with prjquota, a directory with a project ID and a 10 MiB hard block
// limit refuses the write that would pass it, and statfs on the directory
// reports the limit as its size. The error is the kernel's, per filesystem:
// ext4 (the generic quota code) says EDQUOT, "disk quota exceeded"; XFS
// says ENOSPC, "no space left on device", for a project (directory tree)
// quota, as for a full disk, and EDQUOT only for user and group quotas
// (xfs_trans_dqresv in fs/xfs/xfs_trans_dquot.c). If this fails, the VM (its
// kernel, modules or tools) cannot run quota tests, whatever they test.
func TestProjectQuotaRefusesWritesPastTheLimit(t *testing.T) {
	for _, fs := range []struct {
		name    string
		mkfs    []string
		refusal error
	}{
		{"xfs", []string{"mkfs.xfs", "-q"}, unix.ENOSPC},
		// The project and quota features: hidden quota inodes, project IDs.
		{"ext4", []string{"mkfs.ext4", "-q", "-O", "quota,project"}, unix.EDQUOT},
	} {
		t.Run(fs.name, func(t *testing.T) {
			mnt := loopMount(t, fs.name, fs.mkfs)
			dir := filepath.Join(mnt, "vol")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			xfsQuota(t, mnt, fmt.Sprintf("project -s -p %s %d", dir, projectID))
			xfsQuota(t, mnt, fmt.Sprintf("limit -p bhard=%d %d", limitBytes, projectID))

			written, err := fillWithoutSysResource(t, filepath.Join(dir, "data"), limitBytes+(1<<20))
			if !errors.Is(err, fs.refusal) {
				t.Fatalf("writing %d bytes into a directory limited to %d: wrote %d, error %v; want %v",
					limitBytes+(1<<20), limitBytes, written, err, fs.refusal)
			}
			if written < limitBytes-(1<<20) || written > limitBytes {
				t.Errorf("refused after %d bytes; want between %d and %d (the limit, less metadata)", written, limitBytes-(1<<20), limitBytes)
			}
			t.Logf("%s: refused after %d bytes: %v", fs.name, written, err)
			xfsQuota(t, mnt, "report -p -b -n")

			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil {
				t.Fatal(err)
			}
			if size := int64(st.Blocks) * st.Bsize; size != limitBytes {
				t.Errorf("statfs(%s): size %d bytes; want the project limit %d", dir, size, limitBytes)
			}
		})
	}
}

// loopMount makes a filesystem on a sparse file, attaches it to a loop
// device and mounts it with prjquota; cleanup undoes it all.
func loopMount(t *testing.T, fstype string, mkfs []string) string {
	t.Helper()
	testutil.RequireRoot(t)
	for _, tool := range []string{mkfs[0], "losetup", "xfs_quota"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.MissingPrerequisite(t, "%s not found: %v", tool, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testutil.MissingPrerequisite(t, "no loop device support: %v", err)
	}
	ctx := context.Background()
	base := t.TempDir()
	img := filepath.Join(base, fstype+".img")
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(imageBytes); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := testutil.Run(ctx, mkfs[0], append(mkfs[1:], img)...); err != nil {
		t.Fatalf("make %s: %v", fstype, err)
	}
	dev, err := testutil.Run(ctx, "losetup", "--find", "--show", img)
	if err != nil {
		testutil.MissingPrerequisite(t, "cannot attach a loop device: %v", err)
	}
	t.Cleanup(func() {
		if _, err := testutil.Run(context.Background(), "losetup", "--detach", dev); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := unix.Mount(dev, mnt, fstype, 0, "prjquota"); err != nil {
		// A kernel without quota support refuses the option (EINVAL, and
		// "quota support not available" in its log).
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENODEV) {
			testutil.MissingPrerequisite(t, "the kernel cannot mount %s with prjquota: mount %s on %s: %v (no project quota support: run the tier in the quota VM, make quota-vm-tests)", fstype, dev, mnt, err)
		}
		t.Fatalf("mount %s (%s, prjquota) on %s: %v", dev, fstype, mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("cleanup: unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// xfsQuota runs an expert-mode xfs_quota command on the filesystem at mnt;
// -f (foreign mode) lets it drive ext4's project quotas too, through the
// generic quota calls, where without it it skips a non-XFS filesystem
// silently.
func xfsQuota(t *testing.T, mnt, command string) {
	t.Helper()
	out, err := testutil.Run(context.Background(), "xfs_quota", "-f", "-x", "-c", command, mnt)
	if err != nil {
		t.Fatalf("xfs_quota: %v", err)
	}
	if out != "" {
		t.Logf("xfs_quota -c %q:\n%s", command, out)
	}
}

// fillWithoutSysResource runs fill on an OS thread of its own that has
// dropped CAP_SYS_RESOURCE, as a pod's process has not got it (it is not in
// the container runtimes' default set): the generic quota code that ext4
// uses lets a holder of it pass any hard limit (ignore_hardlimit in
// fs/quota/dquot.c), so root writing as such would never see EDQUOT on
// ext4. (XFS enforces project limits on root as on anyone.) The thread
// exits with the goroutine, its reduced capabilities with it.
func fillWithoutSysResource(t *testing.T, path string, n int64) (int64, error) {
	t.Helper()
	type result struct {
		written int64
		err     error
		setup   error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: Go ends the thread when this goroutine returns.
		runtime.LockOSThread()
		if err := dropEffectiveCap(unix.CAP_SYS_RESOURCE); err != nil {
			done <- result{setup: err}
			return
		}
		w, err := testutil.WriteSynced(path, n)
		done <- result{written: w, err: err}
	}()
	r := <-done
	if r.setup != nil {
		t.Fatalf("drop CAP_SYS_RESOURCE for the writer: %v", r.setup)
	}
	return r.written, r.err
}

// dropEffectiveCap clears capability c from the calling thread's effective
// set (it stays permitted, unused).
func dropEffectiveCap(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[c/32].Effective &^= 1 << (uint(c) % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
