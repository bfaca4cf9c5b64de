//go:build linux

package prjquota

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// From linux/fs.h, linux/quota.h and linux/dqblk_xfs.h; x/sys/unix has
// neither the fsxattr ioctls nor the XFS quota commands.
const (
	fsIocFsgetxattr    = 0x801c581f // _IOR('X', 31, struct fsxattr)
	fsIocFssetxattr    = 0x401c5820 // _IOW('X', 32, struct fsxattr)
	fsXflagProjinherit = 0x00000200

	prjQuota       = 2
	qXGetQuota     = 0x5803 // XQM_CMD(3)
	qXSetQLim      = 0x5804 // XQM_CMD(4)
	qXGetQStatV    = 0x5808 // XQM_CMD(8)
	fsDquotVersion = 1
	fsProjQuota    = 2
	fsDqBHard      = 1 << 3
	fsQuotaPdqAcct = 1 << 4
	fsQuotaPdqEnfd = 1 << 5
	basicBlock     = 512
)

type fsxattr struct {
	Xflags     uint32
	Extsize    uint32
	Nextents   uint32
	Projid     uint32
	Cowextsize uint32
	Pad        [8]byte
}

// fsDiskQuota is struct fs_disk_quota (112 bytes); counts in 512-byte blocks.
type fsDiskQuota struct {
	Version      int8
	Flags        int8
	Fieldmask    uint16
	ID           uint32
	BlkHardlimit uint64
	BlkSoftlimit uint64
	InoHardlimit uint64
	InoSoftlimit uint64
	Bcount       uint64
	Icount       uint64
	Itimer       int32
	Btimer       int32
	Iwarns       uint16
	Bwarns       uint16
	TimerHi      [4]int8
	RtbHardlimit uint64
	RtbSoftlimit uint64
	Rtbcount     uint64
	Rtbtimer     int32
	Rtbwarns     uint16
	Padding3     int16
	Padding4     [8]byte
}

// Linux is the kernel's project quotas.
type Linux struct{}

// NewLinux returns the Linux backend.
func NewLinux() Linux { return Linux{} }

func qcmd(cmd int) uintptr { return uintptr(cmd<<8 | prjQuota) }

// quotactl runs quotactl_fd (Linux 5.14) on dir's filesystem, so the block
// device need not be visible (it is not in a container).
func quotactl(dir string, cmd int, id uint32, addr unsafe.Pointer) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer func() { _ = unix.Close(fd) }() // read-only use: a close error changes nothing
	_, _, errno := unix.Syscall6(unix.SYS_QUOTACTL_FD, uintptr(fd), qcmd(cmd), uintptr(id), uintptr(addr), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func (Linux) Probe(dir string) (Probe, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Probe{}, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	p := Probe{FSType: fmt.Sprintf("0x%x", uint64(st.Type))}
	switch uint64(st.Type) {
	case unix.XFS_SUPER_MAGIC:
		p.FSType = "xfs"
	case unix.EXT4_SUPER_MAGIC:
		p.FSType = "ext4"
	}
	var buf [256]byte // struct fs_quota_statv is 160 bytes
	buf[0] = 1        // FS_QSTATV_VERSION1
	err := quotactl(dir, qXGetQStatV, 0, unsafe.Pointer(&buf[0]))
	switch {
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL):
		// The same answer for a kernel without quota support and for a
		// filesystem mounted without quotas (XFS without a quota option,
		// ext4 without the quota feature): the kernel's own files tell
		// which, so the message names what to change.
		if !kernelHasQuota(p.FSType) {
			p.NoQuotactl = err
		}
		return p, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ESRCH):
		// No quota file of any type is on.
		return p, nil
	case err != nil:
		return p, fmt.Errorf("quotactl Q_XGETQSTATV on %s: %w", dir, err)
	}
	flags := uint16(buf[2]) | uint16(buf[3])<<8
	p.Accounting = flags&fsQuotaPdqAcct != 0
	p.Enforcing = flags&fsQuotaPdqEnfd != 0
	return p, nil
}

func getFsxattr(fd int) (fsxattr, error) {
	var a fsxattr
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsgetxattr, uintptr(unsafe.Pointer(&a)))
	if errno != 0 {
		return a, errno
	}
	return a, nil
}

func (Linux) Project(path string) (uint32, bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, false, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }() // read-only use: a close error changes nothing
	a, err := getFsxattr(fd)
	if err != nil {
		return 0, false, &os.PathError{Op: "FS_IOC_FSGETXATTR", Path: path, Err: err}
	}
	return a.Projid, a.Xflags&fsXflagProjinherit != 0, nil
}

func (Linux) SetProject(path string, id uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !isDir && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // links, devices, fifos, sockets: nothing to open safely
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }() // read-only use: a close error changes nothing
	a, err := getFsxattr(fd)
	if err != nil {
		return &os.PathError{Op: "FS_IOC_FSGETXATTR", Path: path, Err: err}
	}
	want := a
	want.Projid = id
	if isDir {
		want.Xflags |= fsXflagProjinherit
	}
	if want == a {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFssetxattr, uintptr(unsafe.Pointer(&want))); errno != 0 {
		return &os.PathError{Op: fmt.Sprintf("FS_IOC_FSSETXATTR (project %d)", id), Path: path, Err: errno}
	}
	return nil
}

func (Linux) Quota(dir string, id uint32) (Quota, error) {
	var d fsDiskQuota
	err := quotactl(dir, qXGetQuota, id, unsafe.Pointer(&d))
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return Quota{}, nil
	}
	if err != nil {
		return Quota{}, fmt.Errorf("quotactl Q_XGETQUOTA project %d on %s: %w", id, dir, err)
	}
	return Quota{HardBytes: int64(d.BlkHardlimit) * basicBlock, UsedBytes: int64(d.Bcount) * basicBlock, UsedInodes: int64(d.Icount)}, nil
}

func (Linux) SetLimit(dir string, id uint32, bytes int64) error {
	d := fsDiskQuota{Version: fsDquotVersion, Flags: fsProjQuota, Fieldmask: fsDqBHard, ID: id,
		BlkHardlimit: uint64((bytes + basicBlock - 1) / basicBlock)}
	if err := quotactl(dir, qXSetQLim, id, unsafe.Pointer(&d)); err != nil {
		return fmt.Errorf("quotactl Q_XSETQLIM project %d to %d bytes on %s: %w", id, bytes, dir, err)
	}
	return nil
}

// kernelQuotaFiles are what the kernel shows when it has quota support for
// a filesystem: XFS's quota statistics (CONFIG_XFS_QUOTA; the xfs module is
// loaded, a filesystem of it being mounted) and the VFS quota sysctls
// (CONFIG_QUOTA, which ext4 uses). Both are readable in a container.
var kernelQuotaFiles = map[string]string{"xfs": "/proc/fs/xfs/xqmstat", "ext4": "/proc/sys/fs/quota"}

// kernelHasQuota reports whether the kernel has quota support for fsType;
// true when it cannot tell (the message then names the mount option or
// feature, the likelier fix).
func kernelHasQuota(fsType string) bool {
	f, ok := kernelQuotaFiles[fsType]
	if !ok {
		return true
	}
	_, err := os.Stat(f)
	return !errors.Is(err, fs.ErrNotExist)
}
