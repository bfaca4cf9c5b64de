//go:build !linux

package capacity

import (
	"errors"
	"io/fs"
)

// Statfs is only implemented on Linux, where hpp runs.
func Statfs(path string) (Stats, error) {
	if err := validatePath("path", path); err != nil {
		return Stats{}, err
	}
	return Stats{}, &fs.PathError{Op: "statfs", Path: path, Err: errors.ErrUnsupported}
}

func sameFilesystem(a, b string) (bool, error) {
	return false, &fs.PathError{Op: "stat", Path: a, Err: errors.ErrUnsupported}
}
