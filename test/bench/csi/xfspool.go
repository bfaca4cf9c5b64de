package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// xfsPoolSize is the loop image behind the XFS pool. It is written in full
// before use: blocks that were only preallocated would turn every first
// write into an extent conversion on the host filesystem, which a real disk
// does not have.
const xfsPoolSize = 1 << 30

// setupXFSPool makes the pool hpp-mounter would make of a disk: XFS on a
// block device. The device is a loop device in direct-I/O mode over a
// preallocated image on the work directory's disk, so XFS's log writes and
// cache flushes reach that disk without a second page cache in between.
// Without losetup or mkfs.xfs it returns a reason to skip instead of an
// error.
func (b *bench) setupXFSPool(ctx context.Context) (skip string, err error) {
	for _, tool := range []string{"losetup", "mkfs.xfs"} {
		if _, lookErr := exec.LookPath(tool); lookErr != nil {
			// Not an error: the benchmark runs without this pool.
			return fmt.Sprintf("%s not found (make deps installs it): %v", tool, lookErr), nil
		}
	}
	img := filepath.Join(b.work, "xfs-pool.img")
	if err := writeZeros(img, xfsPoolSize); err != nil {
		return "", fmt.Errorf("write the XFS pool image: %w", err)
	}
	if b.loopDev, err = testutil.Run(ctx, "losetup", "--find", "--show", "--direct-io=on", img); err != nil {
		return "", err
	}
	if _, err := testutil.Run(ctx, "mkfs.xfs", "-q", "-f", b.loopDev); err != nil {
		return "", err
	}
	dir := filepath.Join(b.work, "xfs-pool")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount(b.loopDev, dir, "xfs", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return "", fmt.Errorf("mount %s on %s: %w", b.loopDev, dir, err)
	}
	// The pool is a directory on the mount, so that the baseline's pool
	// beside it (see launchBaseline) is on the same XFS.
	b.pools[xfsPool] = filepath.Join(dir, "pool")
	if err := os.Mkdir(b.pools[xfsPool], 0o755); err != nil {
		return "", err
	}
	return "", nil
}

func writeZeros(path string, size int64) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	chunk := make([]byte, 4<<20)
	for written := int64(0); written < size; written += int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			return err
		}
	}
	return f.Sync()
}

// detachLoop frees the XFS pool's loop device once it is unmounted.
func (b *bench) detachLoop() {
	if b.loopDev == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := testutil.Run(ctx, "losetup", "--detach", b.loopDev); err != nil {
		fmt.Fprintln(os.Stderr, "bench-csi: cleanup:", err)
	}
}
