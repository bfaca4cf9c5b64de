package dirvol

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// The file operations below open through the system call and wrap the
// descriptor with os.NewFile (one fcntl) instead of os.Open, which adds four
// fcntl calls and a failed epoll registration to every open of a regular
// file or directory; os.Rename adds an lstat of the target. On the
// CreateVolume path that was 33 of 90 system calls.

// Rename renames like rename(2); unlike os.Rename it does not lstat newpath
// first (a directory there is replaced only if it is empty, as rename(2)
// does).
func (osFS) Rename(oldpath, newpath string) error {
	if err := ignoringEINTR(func() error { return unix.Renameat(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath) }); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

func (osFS) WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := openFile(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()))
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = unix.Unlink(path)
	}
	return err
}

// maxMetaSize bounds what ReadFile reads: meta files are a few hundred
// bytes, and a huge file in the meta directory is not one of ours.
const maxMetaSize = 1 << 20

// ReadFile never follows a symbolic link: an inline meta record is a link
// whose target is JSON text, not a path.
func (osFS) ReadFile(path string) ([]byte, error) {
	f, err := openFile(path, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only descriptor
	data, err := io.ReadAll(io.LimitReader(f, maxMetaSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxMetaSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("larger than %d bytes", maxMetaSize)}
	}
	return data, nil
}

func (osFS) SyncFile(path string) error { return syncPath(path) }

func (osFS) SyncDir(path string) error { return syncPath(path) }

// syncPath fsyncs a file or directory through a read-only descriptor, which
// Linux allows for both. The bare descriptor, without an *os.File around it,
// saves the fcntl os.NewFile makes: three system calls per create+delete.
func syncPath(path string) error {
	fd, err := openFD(path, unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	serr := ignoringEINTR(func() error { return unix.Fsync(fd) })
	cerr := unix.Close(fd)
	if serr != nil {
		return &fs.PathError{Op: "fsync", Path: path, Err: serr}
	}
	if cerr != nil {
		return &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

func openFile(path string, flags int, perm uint32) (*os.File, error) {
	fd, err := openFD(path, flags, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func openFD(path string, flags int, perm uint32) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) { fd, err = unix.Open(path, flags|unix.O_CLOEXEC, perm); return err })
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// ignoringEINTR retries a call the Go runtime's own signals interrupted.
func ignoringEINTR(call func() error) error {
	for {
		if err := call(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
