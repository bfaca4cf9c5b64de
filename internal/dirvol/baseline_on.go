//go:build hpp_baseline

package dirvol

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The benchmark's baseline: what the KubeVirt hostpath CSI driver does on
// CreateVolume and DeleteVolume (mkdir, RemoveAll; no record, no fsync), on
// the same gRPC path as hpp-csi, so that `make bench` compares durable
// creates with upstream's on the same disk in one run. Built only with
// -tags hpp_baseline; never shipped.
const baselineNoDurability = true

func (s *Store) baselineCreate(id string, spec Spec) (Volume, bool, error) {
	path := filepath.Join(s.root, id)
	err := os.Mkdir(path, spec.mode())
	if errors.Is(err, fs.ErrExist) {
		return Volume{ID: id, Path: path}, false, nil
	}
	if err != nil {
		return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
	}
	if err := os.Chmod(path, spec.mode()); err != nil {
		return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
	}
	return Volume{ID: id, Path: path, CapacityBytes: spec.CapacityBytes, Kind: spec.kind()}, true, nil
}

func (s *Store) baselineDelete(id string) error {
	if err := os.RemoveAll(filepath.Join(s.root, id)); err != nil {
		return fmt.Errorf("delete volume %q: %w", id, err)
	}
	return nil
}
