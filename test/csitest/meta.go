package csitest

import (
	"errors"
	"os"
	"syscall"
)

// MetaRecord returns the JSON of a volume's meta record at path: the target
// of an inline record (a symbolic link, up to 1 KiB) or the content of a
// file record. It reads the disk itself rather than through hpp, so a test
// sees what an operator would.
func MetaRecord(path string) ([]byte, error) {
	target, err := os.Readlink(path)
	if err == nil {
		return []byte(target), nil
	}
	if !errors.Is(err, syscall.EINVAL) {
		return nil, err
	}
	return os.ReadFile(path)
}
