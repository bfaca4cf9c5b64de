package treecopy

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setMeta gives dst the owner, mode, xattrs and timestamps of src (fi). The
// order matters: chown clears setuid/setgid bits, so the mode comes after
// it, and the timestamps come last because every other change touches
// ctime/mtime. A symbolic link has no mode of its own.
func setMeta(src, dst string, fi fs.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	link := fi.Mode()&fs.ModeSymlink != 0
	if !link {
		if err := os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
	}
	if err := copyXattrs(src, dst); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(syscall.TimespecToNsec(st.Atim)), unix.NsecToTimespec(syscall.TimespecToNsec(st.Mtim))}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "utimensat", Path: dst, Err: err}
	}
	return nil
}

// copyXattrs copies every extended attribute of src (not following a
// symbolic link) to dst: SELinux labels, ACLs, capabilities, user data.
func copyXattrs(src, dst string) error {
	names, err := listXattrs(src)
	if errors.Is(err, unix.ENOTSUP) {
		return nil // the source filesystem keeps none
	}
	if err != nil {
		return &fs.PathError{Op: "llistxattr", Path: src, Err: err}
	}
	for _, name := range names {
		val, err := getXattr(src, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return &fs.PathError{Op: "lgetxattr " + name, Path: src, Err: err}
		}
		if err := unix.Lsetxattr(dst, name, val, 0); err != nil {
			return &fs.PathError{Op: "lsetxattr " + name, Path: dst, Err: err}
		}
	}
	return nil
}

func listXattrs(p string) ([]string, error) {
	size, err := unix.Llistxattr(p, nil)
	for err == nil && size > 0 {
		buf := make([]byte, size)
		var n int
		n, err = unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			size, err = unix.Llistxattr(p, nil) // grew meanwhile
			continue
		}
		if err != nil {
			break
		}
		var names []string
		for _, n := range strings.Split(string(buf[:n]), "\x00") {
			if n != "" {
				names = append(names, n)
			}
		}
		return names, nil
	}
	return nil, err
}

func getXattr(p, name string) ([]byte, error) {
	for {
		size, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}
