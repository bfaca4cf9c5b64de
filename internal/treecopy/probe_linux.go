package treecopy

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ProbeReflink reports whether the filesystem of dir shares file data by
// reflink: it clones a small file it makes in dir (a private staging
// directory: the files are removed again). A filesystem without reflink
// answers false with no error; an error means the probe itself failed.
func ProbeReflink(dir string) (bool, error) {
	src, err := os.CreateTemp(dir, ".reflink-probe-*")
	if err != nil {
		return false, fmt.Errorf("reflink probe: %w", err)
	}
	defer os.Remove(src.Name()) //nolint:errcheck // best effort: a leftover is a 4 KiB file in staging
	defer src.Close()           //nolint:errcheck // nothing written after the clone
	if _, err := src.Write(make([]byte, 4096)); err != nil {
		return false, fmt.Errorf("reflink probe: %w", err)
	}
	dst, err := os.CreateTemp(dir, ".reflink-probe-*")
	if err != nil {
		return false, fmt.Errorf("reflink probe: %w", err)
	}
	defer os.Remove(dst.Name()) //nolint:errcheck // as above
	defer dst.Close()           //nolint:errcheck // nothing written
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	if err == nil {
		return true, nil
	}
	if cannotClone(err) {
		return false, nil
	}
	return false, fmt.Errorf("reflink probe in %s: ficlone: %w", dir, err)
}

// Syncfs makes everything written to the filesystem that holds path
// durable, in one call: cheaper than an fsync per copied file, and what a
// clone or snapshot needs before it is published.
func Syncfs(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("syncfs: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only descriptor
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: path, Err: err}
	}
	return nil
}
