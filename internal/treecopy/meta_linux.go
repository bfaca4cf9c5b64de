package treecopy

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// meta is what an entry keeps besides its data and its name: owner, mode,
// extended attributes and timestamps. Tree reads it from a source entry
// and applies it to the copy; Encode writes it into the stream and Decode
// applies what it read, so both forms of the copy set metadata with the
// same code.
type meta struct {
	uid, gid uint32
	// mode is st_mode: the file type (S_IFMT) and the permission bits.
	mode         uint32
	atime, mtime unix.Timespec
	xattrs       []xattr
}

type xattr struct {
	name  string
	value []byte
}

// readMeta takes src's metadata: fi (its Lstat, taken before the entry
// was read, so the atime is the one before the copy) and its xattrs.
func readMeta(src string, fi fs.FileInfo) (meta, error) {
	st := fi.Sys().(*syscall.Stat_t)
	xs, err := readXattrs(src)
	if err != nil {
		return meta{}, err
	}
	return meta{
		uid: st.Uid, gid: st.Gid, mode: st.Mode,
		atime:  unix.Timespec{Sec: st.Atim.Sec, Nsec: st.Atim.Nsec},
		mtime:  unix.Timespec{Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec},
		xattrs: xs,
	}, nil
}

// setMeta gives dst the owner, mode, xattrs and timestamps of src (fi).
func setMeta(src, dst string, fi fs.FileInfo) error {
	m, err := readMeta(src, fi)
	if err != nil {
		return err
	}
	return m.apply(dst)
}

// apply gives dst (never followed if it is a symbolic link) the metadata.
// The order matters: chown clears setuid/setgid bits and security.capability,
// so the mode and the xattrs come after it, and the timestamps come last
// because every other change touches ctime/mtime. A symbolic link has no
// mode of its own.
func (m *meta) apply(dst string) error {
	if err := os.Lchown(dst, int(m.uid), int(m.gid)); err != nil {
		return err
	}
	if m.mode&unix.S_IFMT != unix.S_IFLNK {
		if err := unix.Chmod(dst, m.mode&0o7777); err != nil {
			return &fs.PathError{Op: "chmod", Path: dst, Err: err}
		}
	}
	for _, x := range m.xattrs {
		if err := unix.Lsetxattr(dst, x.name, x.value, 0); err != nil {
			return &fs.PathError{Op: "lsetxattr " + x.name, Path: dst, Err: err}
		}
	}
	ts := []unix.Timespec{m.atime, m.mtime}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "utimensat", Path: dst, Err: err}
	}
	return nil
}

// readXattrs returns every extended attribute of src (not following a
// symbolic link): SELinux labels, ACLs, capabilities, user data.
func readXattrs(src string) ([]xattr, error) {
	names, err := listXattrs(src)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil // the source filesystem keeps none
	}
	if err != nil {
		return nil, &fs.PathError{Op: "llistxattr", Path: src, Err: err}
	}
	var out []xattr
	for _, name := range names {
		val, err := getXattr(src, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, &fs.PathError{Op: "lgetxattr " + name, Path: src, Err: err}
		}
		out = append(out, xattr{name: name, value: val})
	}
	return out, nil
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
