package dirvol

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OS returns the FileSystem of the running host: plain os calls, plus
// renameat2 (exclusive rename) and fcntl locks, which os does not offer.
func OS() FileSystem { return osFS{} }

type osFS struct{}

func (osFS) MkdirAll(path string, perm fs.FileMode) error  { return os.MkdirAll(path, perm) }
func (osFS) MkdirTemp(dir, pattern string) (string, error) { return os.MkdirTemp(dir, pattern) }
func (osFS) Rename(oldpath, newpath string) error          { return os.Rename(oldpath, newpath) }
func (osFS) Remove(path string) error                      { return os.Remove(path) }
func (osFS) RemoveAll(path string) error                   { return os.RemoveAll(path) }
func (osFS) Lstat(path string) (fs.FileInfo, error)        { return os.Lstat(path) }
func (osFS) Chmod(path string, mode fs.FileMode) error     { return os.Chmod(path, mode) }
func (osFS) Lchown(path string, uid, gid int) error        { return os.Lchown(path, uid, gid) }
func (osFS) ReadDir(path string) ([]fs.DirEntry, error)    { return os.ReadDir(path) }
func (osFS) Readlink(path string) (string, error)          { return os.Readlink(path) }

func (osFS) RenameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// The filesystem cannot do an exclusive rename (e.g. NFS). Check,
		// then rename: callers serialise per id (and shared pools take
		// the cross-node lock), so nobody else renames onto newpath.
		if _, lerr := os.Lstat(newpath); lerr == nil {
			err = unix.EEXIST
		} else {
			err = unix.Rename(oldpath, newpath)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "renameat2", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

func (osFS) WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// maxRecordSize bounds what ReadFile reads: records are a few hundred
// bytes, and a huge file among them is not one of ours.
const maxRecordSize = 1 << 20

func (osFS) ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only descriptor
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecordSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("larger than %d bytes", maxRecordSize)}
	}
	return data, nil
}

func (osFS) SyncFile(path string) error { return syncPath(path) }
func (osFS) SyncDir(path string) error  { return syncPath(path) }

// syncPath fsyncs a file or a directory through a read-only descriptor,
// which Linux allows for both.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

func (osFS) SetRecordAttr(path string, data []byte) error {
	if err := unix.Lsetxattr(path, RecordAttr, data, 0); err != nil {
		return &fs.PathError{Op: "setxattr " + RecordAttr, Path: path, Err: err}
	}
	return nil
}

func (osFS) RecordAttr(path string) ([]byte, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Lgetxattr(path, RecordAttr, buf)
		switch {
		case errors.Is(err, unix.ERANGE) && len(buf) < maxRecordSize:
			buf = make([]byte, 4*len(buf))
			continue
		case errors.Is(err, unix.ENODATA):
			return nil, &fs.PathError{Op: "getxattr " + RecordAttr, Path: path, Err: fs.ErrNotExist}
		case err != nil:
			return nil, &fs.PathError{Op: "getxattr " + RecordAttr, Path: path, Err: err}
		}
		return buf[:n], nil
	}
}

// orderedJournals are the filesystems whose metadata changes reach the disk
// in the order they were made, one journal for the whole filesystem: an
// fsync that makes a rename durable makes every earlier change durable too,
// the attribute set on the directory before it was renamed included. tmpfs
// keeps nothing across a reboot, so order does not matter there.
var orderedJournals = map[int64]string{
	unix.EXT4_SUPER_MAGIC: "ext4",
	unix.XFS_SUPER_MAGIC:  "xfs",
	unix.TMPFS_MAGIC:      "tmpfs",
}

func (osFS) CanKeepRecordAttrs(dir string) (bool, string) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Sprintf("statfs %s: %v", dir, err)
	}
	if _, ok := orderedJournals[int64(st.Type)]; !ok {
		return false, fmt.Sprintf("filesystem type %#x is not one whose journal keeps metadata in order (ext4, xfs, tmpfs)", st.Type)
	}
	const probe = "trusted.hpp.probe"
	if err := unix.Lsetxattr(dir, probe, []byte("1"), 0); err != nil {
		return false, fmt.Sprintf("setxattr %s on %s: %v (trusted attributes need CAP_SYS_ADMIN and filesystem support)", probe, dir, err)
	}
	_ = unix.Lremovexattr(dir, probe)
	return true, ""
}
