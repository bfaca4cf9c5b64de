// Package csiabuse attacks hpp-csi over its real socket: concurrent calls
// for the same volume, hostile volume ids and names, and SIGKILL in the
// middle of creates and deletes. Every test needs root (real mounts, real
// ownership) and skips, with the reason, without it.
package csiabuse

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const (
	node     = csitest.DefaultNodeName
	poolName = "p"
	MiB      = int64(1 << 20)
)

// startDriver runs hpp-csi with one pool at poolPath (made if missing).
func startDriver(t *testing.T, poolPath string) *csitest.Driver {
	t.Helper()
	testutil.RequireRoot(t)
	if err := os.MkdirAll(poolPath, 0o755); err != nil {
		t.Fatal(err)
	}
	return csitest.Start(t, node, []csitest.Pool{{Name: poolName, Path: poolPath}})
}

func volumesDir(pool string) string { return filepath.Join(pool, csitest.VolumesSubdir) }

// visible lists the entries of dir that are volumes (not hidden areas).
func visible(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, name := range csitest.Entries(t, dir) {
		if name[0] != '.' {
			out = append(out, name)
		}
	}
	return out
}

// meta is the part of a volume's meta file the tests check.
type meta struct {
	ID            string `json:"id"`
	Kind          string `json:"kind"`
	CapacityBytes int64  `json:"capacityBytes"`
}

func readMeta(pool, id string) (meta, error) {
	var m meta
	data, err := csitest.ReadRecord(volumesDir(pool), id)
	if err != nil {
		return m, err
	}
	err = json.Unmarshal(data, &m)
	return m, err
}

// ownership of path: permission bits, uid, gid.
func ownership(path string) (os.FileMode, uint32, uint32, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, 0, err
	}
	if !fi.IsDir() {
		return 0, 0, 0, errors.New(path + " is not a directory")
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode().Perm(), st.Uid, st.Gid, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
