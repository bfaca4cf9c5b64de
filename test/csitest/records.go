package csitest

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// RecordAttr is the extended attribute of a volume directory that holds its
// record, where the pool's filesystem allows it; elsewhere the record is the
// file RecordsDir/<id> (see internal/dirvol's package doc, "Records").
const RecordAttr = "trusted.hpp.record"

// ReadRecord returns the record of volume id in the volumes directory root,
// in whichever form the driver kept it; an error matching os.ErrNotExist
// when it has none.
func ReadRecord(root, id string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, RecordsDir, id))
	if !errors.Is(err, os.ErrNotExist) {
		return data, err
	}
	buf := make([]byte, 64<<10)
	n, err := unix.Lgetxattr(filepath.Join(root, id), RecordAttr, buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOENT) {
		return nil, os.ErrNotExist
	}
	if err != nil {
		return nil, &os.PathError{Op: "getxattr " + RecordAttr, Path: filepath.Join(root, id), Err: err}
	}
	return buf[:n], nil
}

// RecordIDs lists, sorted, the ids that have a record in root: record
// files (whether or not their directory exists) and directories carrying
// the record attribute.
func RecordIDs(t testing.TB, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, name := range Entries(t, filepath.Join(root, RecordsDir)) {
		seen[name] = true
	}
	for _, name := range Entries(t, root) {
		if name[0] == '.' {
			continue
		}
		if _, err := unix.Lgetxattr(filepath.Join(root, name), RecordAttr, nil); err == nil {
			seen[name] = true
		}
	}
	out := []string{}
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
