package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// SyscallMounter bind mounts with mount(2) directly: publishing is on the
// pod start path, and forking mount(8) per call costs milliseconds.
type SyscallMounter struct{}

var perMountFlags = map[string]uintptr{
	"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME,
}

// BindMount makes the bind mount, then remounts it to apply read-only and
// the per-mount flags: the kernel ignores them on the first MS_BIND call.
func (SyscallMounter) BindMount(source, target string, readOnly bool, flags []string) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount --bind %s %s: %w", source, target, err)
	}
	var extra uintptr
	for _, f := range flags {
		extra |= perMountFlags[f]
	}
	if readOnly {
		extra |= unix.MS_RDONLY
	}
	if extra == 0 {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|extra, ""); err != nil {
		// Never leave a writable mount where a read-only one was asked.
		_ = unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("remount %s with flags %v (read-only %v): %w", target, flags, readOnly, err)
	}
	return nil
}

func (SyscallMounter) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("umount %s: %w", target, err)
	}
	return nil
}

// IsMountPoint reads mountinfo (openat2 where the kernel has it), which sees
// bind mounts of the same filesystem that a device-id comparison misses.
func (SyscallMounter) IsMountPoint(path string) (bool, error) {
	// Lstat first so a missing path reports fs.ErrNotExist, which callers
	// treat as "nothing mounted, nothing to remove".
	if _, err := os.Lstat(path); err != nil {
		return false, err
	}
	return mountinfo.Mounted(path)
}

// BindTargets finds the mounts whose source is the directory source: same
// filesystem (major:minor) and the same path inside it (mountinfo's root).
func (SyscallMounter) BindTargets(source string) ([]string, error) {
	host, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	// The mount holding source: the longest mount point that prefixes it.
	var holder *mountinfo.Info
	for _, m := range host {
		if isUnder(source, m.Mountpoint) && (holder == nil || len(m.Mountpoint) > len(holder.Mountpoint)) {
			holder = m
		}
	}
	if holder == nil {
		return nil, fmt.Errorf("no mount holds %s", source)
	}
	rel := strings.TrimPrefix(source, holder.Mountpoint)
	root := filepath.Join(holder.Root, rel)
	var out []string
	for _, m := range host {
		if m.Major == holder.Major && m.Minor == holder.Minor && m.Root == root && m.Mountpoint != source {
			out = append(out, m.Mountpoint)
		}
	}
	return out, nil
}

func isUnder(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
