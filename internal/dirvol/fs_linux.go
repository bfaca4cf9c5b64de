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
