package dirvol

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// The file operations below call the system directly instead of going
// through os.File: os.Open adds four fcntl calls and a failed epoll
// registration to every open of a regular file or directory, and os.Rename
// an lstat of the target. On the CreateVolume path that was 33 of 90 system
// calls.

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
	fd, err := openFD(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()))
	if err != nil {
		return err
	}
	werr := writeAll(fd, data)
	cerr := unix.Close(fd)
	if werr == nil && cerr != nil {
		werr = &fs.PathError{Op: "close", Path: path, Err: cerr}
	} else if werr != nil {
		werr = &fs.PathError{Op: "write", Path: path, Err: werr}
	}
	if werr != nil {
		_ = unix.Unlink(path)
	}
	return werr
}

// maxMetaSize bounds what ReadFile reads: meta files are a few hundred
// bytes, and a huge file in the meta directory is not one of ours.
const maxMetaSize = 1 << 20

func (osFS) ReadFile(path string) ([]byte, error) {
	fd, err := openFD(path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd) //nolint:errcheck // read-only descriptor
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxMetaSize {
				return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("larger than %d bytes", maxMetaSize)}
			}
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		var n int
		err := ignoringEINTR(func() (err error) { n, err = unix.Read(fd, buf[len(buf):cap(buf)]); return err })
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func (osFS) SyncFile(path string) error { return syncPath(path) }

func (osFS) SyncDir(path string) error { return syncPath(path) }

// syncPath fsyncs a file or directory through a read-only descriptor, which
// Linux allows for both.
func syncPath(path string) error {
	fd, err := openFD(path, unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	serr := ignoringEINTR(func() error { return unix.Fsync(fd) })
	cerr := unix.Close(fd)
	if serr != nil {
		return &fs.PathError{Op: "sync", Path: path, Err: serr}
	}
	if cerr != nil {
		return &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

func openFD(path string, flags int, perm uint32) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) { fd, err = unix.Open(path, flags|unix.O_CLOEXEC, perm); return err })
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		var n int
		err := ignoringEINTR(func() (err error) { n, err = unix.Write(fd, data); return err })
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// ignoringEINTR retries a call the Go runtime's own signals interrupted.
func ignoringEINTR(call func() error) error {
	for {
		if err := call(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
