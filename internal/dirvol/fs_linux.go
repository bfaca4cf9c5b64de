package dirvol

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// OS returns the FileSystem of the running host.
func OS() FileSystem { return osFS{} }

type osFS struct{}

func (osFS) MkdirAll(path string, perm fs.FileMode) error  { return os.MkdirAll(path, perm) }
func (osFS) MkdirTemp(dir, pattern string) (string, error) { return os.MkdirTemp(dir, pattern) }
func (osFS) Remove(path string) error                      { return os.Remove(path) }
func (osFS) RemoveAll(path string) error                   { return os.RemoveAll(path) }
func (osFS) Lstat(path string) (fs.FileInfo, error)        { return os.Lstat(path) }
func (osFS) Chmod(path string, mode fs.FileMode) error     { return os.Chmod(path, mode) }
func (osFS) Lchown(path string, uid, gid int) error        { return os.Lchown(path, uid, gid) }
func (osFS) ReadDir(path string) ([]fs.DirEntry, error)    { return os.ReadDir(path) }
func (osFS) Symlink(target, path string) error             { return os.Symlink(target, path) }
func (osFS) Readlink(path string) (string, error)          { return os.Readlink(path) }

func (osFS) RenameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// The filesystem cannot do an exclusive rename (e.g. some network
		// filesystems). Check, then rename: the Store's per-id lock covers
		// this process; another process racing on the same id is not covered.
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
