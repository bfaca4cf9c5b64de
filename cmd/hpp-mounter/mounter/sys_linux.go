package mounter

import (
	"errors"
	"fmt"
	"os"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
)

// LinuxSys is Sys with mount(2) and /proc/self/mountinfo: the image carries
// no host binaries and runs none through a chroot.
type LinuxSys struct{}

func (LinuxSys) Mounts() ([]*mountinfo.Info, error) {
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	return mounts, nil
}

func (LinuxSys) StatSource(path string) (SourceInfo, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return SourceInfo{}, fmt.Errorf("stat: %w (is the pool PVC attached to this pod?)", err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return SourceInfo{Kind: KindBlock, Major: int(unix.Major(st.Rdev)), Minor: int(unix.Minor(st.Rdev))}, nil
	case unix.S_IFDIR:
		return SourceInfo{Kind: KindDirectory}, nil
	}
	return SourceInfo{}, fmt.Errorf("is neither a directory (filesystem PVC) nor a block device (block PVC): mode %#o", st.Mode&unix.S_IFMT)
}

func (LinuxSys) MkdirAll(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return fmt.Errorf("making the pool mount point: %w", err)
	}
	return nil
}

func (LinuxSys) Bind(source, target string) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount --bind %s %s: %w", source, target, err)
	}
	return nil
}

func (LinuxSys) MountXFS(device, target, data string) error {
	err := unix.Mount(device, target, "xfs", 0, data)
	if errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("mount %s (xfs) on %s: %w: the node's kernel has no XFS support", device, target, err)
	}
	if err != nil && data != "" {
		// EINVAL here is mostly a kernel without XFS quota support
		// (CONFIG_XFS_QUOTA) refusing the option.
		return fmt.Errorf("mount %s (xfs, %s) on %s: %w: the pool enforces sizes (enforceSize), which needs the node's kernel to support XFS project quotas", device, data, target, err)
	}
	if err != nil {
		return fmt.Errorf("mount %s (xfs) on %s: %w", device, target, err)
	}
	return nil
}

func (LinuxSys) Unmount(target string) error {
	err := unix.Unmount(target, 0)
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("umount %s: %w: something on the node still uses the pool (open files or a process's working directory); not detaching lazily", target, err)
	}
	if err != nil {
		return fmt.Errorf("umount %s: %w", target, err)
	}
	return nil
}

func (LinuxSys) Marker(dir, pool, node string) error {
	return poolmarker.Ensure(dir, poolmarker.Marker{Pool: pool, Node: node, CreatedBy: "hpp-mounter"})
}

func (LinuxSys) CheckMarker(dir, pool string) error {
	return poolmarker.Check(dir, pool)
}
