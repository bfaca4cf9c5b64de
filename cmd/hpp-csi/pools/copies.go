package pools

import (
	"context"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/snapshot"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// defaultSnapshotDir is a pool's snapshot area when its snapshotPath is
// not set: hidden inside the volumes directory, so on the same filesystem
// (reflinks work) and never a volume (ids never start with '.').
const defaultSnapshotDir = ".hpp-snapshots"

// snapshotsOn reports whether the pool takes snapshots: as in the KubeVirt
// driver, a pool does when its snapshotProvider is set.
func snapshotsOn(p pool.Pool) bool { return p.SnapshotProvider != "" }

func snapshotArea(p pool.Pool) string {
	if p.SnapshotPath != "" {
		return p.SnapshotPath
	}
	return filepath.Join(p.Path, defaultSnapshotDir)
}

// notVolumes names the snapshot area when it is a directory directly in
// the volumes directory (pool validation allows no deeper nesting).
func notVolumes(p pool.Pool) []string {
	if p.SnapshotPath != "" && filepath.Dir(p.SnapshotPath) == p.Path {
		return []string{filepath.Base(p.SnapshotPath)}
	}
	return nil
}

// AnySnapshots reports whether any pool of this node takes snapshots: the
// snapshot capabilities are claimed only then.
func (rt *Runtime) AnySnapshots() bool {
	for _, p := range rt.pools {
		if snapshotsOn(p.cfg) {
			return true
		}
	}
	return false
}

// openCopies probes the pool's filesystem for reflink (in the pool's
// staging directory, which only hpp uses) and opens and recovers its
// snapshot area. Called with the pool being opened.
func (rt *Runtime) openCopies(ctx context.Context, p *poolState) (poolCopies, error) {
	var c poolCopies
	ok, err := treecopy.ProbeReflink(filepath.Join(p.cfg.Path, dirvol.StagingDir))
	if err != nil {
		// A failed probe costs speed, not correctness: copy.
		rt.log.Warn("reflink probe failed; clones and snapshots copy data", zap.String("pool", p.name()), zap.Error(err))
	}
	if ok {
		c.mode = treecopy.Reflink
	}
	rt.setCopyMode(p.name(), c.mode)
	rt.log.Info("storage pool copy mode", zap.String("pool", p.name()), zap.String("copy", c.mode.String()),
		zap.Bool("snapshots", snapshotsOn(p.cfg)))
	c.cache = rt.openCloneCache(p, c.mode)
	if !snapshotsOn(p.cfg) {
		return c, nil
	}
	// The copy mode was probed in the pool; an area on another
	// filesystem falls back to copying file by file (FICLONE says EXDEV).
	snaps, err := snapshot.Open(snapshotArea(p.cfg), nodeTagOf(rt.cfg.NodeID), c.mode, rt.log.Named("snapshot"))
	if err != nil {
		return c, err
	}
	n, err := snaps.Recover(ctx)
	if err != nil {
		return c, err
	}
	if n > 0 {
		rt.log.Info("unfinished snapshots removed", zap.String("pool", p.name()), zap.Int("removed", n))
	}
	c.snaps = snaps
	return c, nil
}

// nodeTagOf prefixes this node's staging names in a snapshot area; dots
// become '_' so that the tag never contains the '.' that ends it.
func nodeTagOf(nodeID string) string { return strings.ReplaceAll(nodeID, ".", "_") }
