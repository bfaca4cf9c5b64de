package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// MinXFSBytes is the smallest filesystem mkfs.xfs (xfsprogs >= 5.19) makes;
// LoopXFS rounds smaller sizes up. The backing file is sparse, so the size
// costs nothing until written.
const MinXFSBytes = 300 << 20

// TmpfsDir mounts a tmpfs of sizeBytes on a fresh temporary directory and
// returns it; Cleanup unmounts it. Skips, with the reason, unless root.
func TmpfsDir(t testing.TB, sizeBytes int64) string {
	t.Helper()
	RequireRoot(t)
	if sizeBytes <= 0 {
		t.Fatalf("TmpfsDir: sizeBytes must be positive, got %d", sizeBytes)
	}
	dir := t.TempDir()
	opts := fmt.Sprintf("size=%d,mode=0755", sizeBytes)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatalf("mount tmpfs (%s) on %s: %v", opts, dir, err)
	}
	// Registered after t.TempDir's own cleanup, so it runs before it:
	// unmount first, then the empty mount point is removed.
	t.Cleanup(func() { unmount(t, dir) })
	return dir
}

// LoopXFS makes a fresh XFS filesystem of sizeBytes (at least MinXFSBytes) on
// a sparse file attached to a loop device, mounts it on a temporary
// directory and returns that directory. Cleanup unmounts and detaches, also
// when the test fails midway. Skips, with the reason, unless root, when no
// loop device can be had, or when mkfs.xfs is missing (`make deps` installs
// xfsprogs) or the kernel cannot mount XFS.
func LoopXFS(t testing.TB, sizeBytes int64) string {
	t.Helper()
	RequireRoot(t)
	if sizeBytes <= 0 {
		t.Fatalf("LoopXFS: sizeBytes must be positive, got %d", sizeBytes)
	}
	sizeBytes = max(sizeBytes, MinXFSBytes)
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		MissingPrerequisite(t, "mkfs.xfs not found (%v); install xfsprogs (make deps)", err)
	}
	losetup, err := exec.LookPath("losetup")
	if err != nil {
		MissingPrerequisite(t, "losetup not found (%v); install util-linux", err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		MissingPrerequisite(t, "no loop device support: %v", err)
	}

	base := t.TempDir()
	img := filepath.Join(base, "xfs.img")
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sparseFile(img, sizeBytes); err != nil {
		t.Fatal(err)
	}
	// mkfs on the file, not the device: same result, and a failure here
	// needs no loop device cleanup.
	if _, err := Run(context.Background(), mkfs, "-q", img); err != nil {
		t.Fatalf("make XFS: %v", err)
	}
	dev, err := Run(context.Background(), losetup, "--find", "--show", img)
	if err != nil {
		MissingPrerequisite(t, "cannot attach a loop device: %v", err)
	}
	t.Cleanup(func() { detach(t, losetup, dev) })

	err = unix.Mount(dev, mnt, "xfs", 0, "")
	if errors.Is(err, unix.ENODEV) {
		MissingPrerequisite(t, "the kernel cannot mount XFS: mount %s on %s: %v", dev, mnt, err)
	}
	if err != nil {
		t.Fatalf("mount %s (xfs) on %s: %v", dev, mnt, err)
	}
	t.Cleanup(func() { unmount(t, mnt) })
	return mnt
}

func sparseFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// unmount unmounts dir; if something still holds it (a leaked file handle in
// a failed test), it detaches lazily so the test run does not leak a mount.
func unmount(t testing.TB, dir string) {
	t.Helper()
	err := unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		t.Logf("unmount %s: busy, detaching lazily", dir)
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		t.Errorf("cleanup: unmount %s: %v", dir, err)
	}
}

func detach(t testing.TB, losetup, dev string) {
	t.Helper()
	// t.Context is already cancelled when cleanups run.
	if _, err := Run(context.Background(), losetup, "--detach", dev); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// LoopDevice attaches a sparse file of sizeBytes (all zeros: no signature
// of any kind) to a loop device and returns the device and the file;
// cleanup detaches it. Skips, with the reason, unless root and a loop
// device can be had.
func LoopDevice(t testing.TB, sizeBytes int64) (dev, img string) {
	t.Helper()
	RequireRoot(t)
	losetup, err := exec.LookPath("losetup")
	if err != nil {
		MissingPrerequisite(t, "losetup not found (%v); install util-linux", err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		MissingPrerequisite(t, "no loop device support: %v", err)
	}
	img = filepath.Join(t.TempDir(), "disk.img")
	if err := sparseFile(img, sizeBytes); err != nil {
		t.Fatal(err)
	}
	dev, err = Run(context.Background(), losetup, "--find", "--show", img)
	if err != nil {
		MissingPrerequisite(t, "cannot attach a loop device: %v", err)
	}
	t.Cleanup(func() { detach(t, losetup, dev) })
	return dev, img
}
