package probes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

// QuotaLinks reads an enforcing pool's project ID ledger: the links in
// <volumes dir>/.hpp-quota, each named for an ID and pointing at the
// volume that holds it. A pool that enforces no sizes has no ledger: an
// empty map.
func QuotaLinks(volumesDir string) (map[uint32]string, error) {
	dir := filepath.Join(volumesDir, prjquota.StateDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[uint32]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	links := map[uint32]string{}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue // hpp-csi leaves foreign entries alone, and so does the check
		}
		vol, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		links[uint32(id)] = vol
	}
	return links, nil
}

// HardLimit reads the kernel's hard limit in bytes of a project ID on
// the pool's filesystem.
type HardLimit func(id uint32) (int64, error)

// CheckQuotaReleased fails when a deleted volume still holds a project
// ID: its link is still in the pool's ledger (links, read now), or the ID
// it held (deleted: volume -> ID, read before the delete) is held by no
// volume now yet keeps a hard limit in the kernel. limit nil checks the
// links only (a pool whose kernel cannot be asked).
func CheckQuotaReleased(links map[uint32]string, deleted map[string]uint32, limit HardLimit) error {
	var left []string
	gone := map[string]bool{}
	for vol := range deleted {
		gone[vol] = true
	}
	for id, vol := range links {
		if gone[vol] {
			left = append(left, fmt.Sprintf("volume %s still linked to project %d", vol, id))
		}
	}
	for vol, id := range deleted {
		if _, held := links[id]; held || limit == nil {
			continue // handed to another volume since, or not asked
		}
		hard, err := limit(id)
		if err != nil {
			return fmt.Errorf("reading the limit of project %d: %w", id, err)
		}
		if hard != 0 {
			left = append(left, fmt.Sprintf("project %d of deleted volume %s keeps a hard limit of %d bytes", id, vol, hard))
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		return &Violation{fmt.Sprintf("deleted volumes left %d project IDs held: %s", len(left), strings.Join(left, "; "))}
	}
	return nil
}
