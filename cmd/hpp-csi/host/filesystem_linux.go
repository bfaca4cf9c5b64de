package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Filesystem is the host's real filesystem.
type Filesystem struct{}

func (Filesystem) Statfs(path string) (capacity.Stats, error) { return capacity.Statfs(path) }

func (Filesystem) DeviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, fmt.Errorf("stat %s: %w", path, fs.ErrNotExist)
		}
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("%s is not a directory", path)
	}
	return st.Dev, nil
}

func (Filesystem) SameFile(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

func (Filesystem) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (Filesystem) Remove(path string) error                     { return os.Remove(path) }

func (Filesystem) Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

func (Filesystem) Usage(ctx context.Context, path string) (dirvol.Usage, error) {
	return dirvol.DirUsage(ctx, path)
}
