package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// Reasons are CamelCase per the CSI spec; messages say what to do.
const (
	reasonPoolPathMissing   = "PoolPathMissing"
	reasonPoolMountLost     = "PoolMountLost"
	reasonLegacyPathMissing = "LegacyPathMissing"
	reasonLegacyMountLost   = "LegacyMountLost"
)

// missingReasons are the reasons for a root that cannot be reached: never
// there, or gone since it was opened.
func (r *root) missingReasons() (missing, lost string) {
	if r.legacy {
		return reasonLegacyPathMissing, reasonLegacyMountLost
	}
	return reasonPoolPathMissing, reasonPoolMountLost
}

// rootProblems inspects one of p's roots as it is now: its directory,
// whether it is still on the filesystem it was opened on, free space and
// inodes. A legacy directory on the pool's own filesystem adds no space
// problems: the pool's own directory reports them.
func (d *Driver) rootProblems(p *poolState, r *root) []problem {
	if r == nil {
		return nil
	}
	opened := r.openedDevice()
	missing, lost := r.missingReasons()
	dev, err := d.deps.FS.DeviceOf(r.path)
	if err != nil {
		msg := fmt.Sprintf("storage pool %q: cannot stat %s: %v", p.name(), r.named(), err)
		reason := missing
		switch {
		case errors.Is(err, fs.ErrNotExist) && opened != 0:
			// A volumes directory lives on its disk: it vanishes with the mount.
			reason = lost
			msg = fmt.Sprintf("storage pool %q: %s was there when it was opened and is gone now; its mount disappeared (remount it; hpp-csi does not recreate it)", p.name(), r.named())
		case errors.Is(err, fs.ErrNotExist):
			msg = fmt.Sprintf("storage pool %q: %s %s is missing; %s", p.name(), r.label(), r.path, mountHint(r))
		}
		return []problem{{unreachable: true, reason: reason, message: msg}}
	}
	if opened != 0 && dev != opened {
		return []problem{{unreachable: true, reason: lost, message: fmt.Sprintf(
			"storage pool %q: %s is now on another filesystem (device %d, was %d); its mount disappeared and writes would land on the wrong disk",
			p.name(), r.named(), dev, opened)}}
	}
	if r.legacy {
		if own, err := d.deps.FS.DeviceOf(p.cfg.Path); err == nil && own == dev {
			return nil
		}
	}
	st, err := d.deps.FS.Statfs(r.path)
	if err != nil {
		return []problem{{unreachable: true, reason: missing, message: fmt.Sprintf("storage pool %q: statfs of %s: %v", p.name(), r.named(), err)}}
	}
	out := spaceProblems(p, st)
	if r.legacy {
		for i := range out {
			out[i].message = fmt.Sprintf("legacy directory %s: %s", r.path, out[i].message)
		}
	}
	return out
}

func mountHint(r *root) string {
	if r.legacy {
		return "mount the disk of the legacy volumes"
	}
	return "mount the pool's disk"
}

// volumeProblemsOf are the problems of a located volume: its pool's own
// directory's, and its legacy directory's when it lives there.
func (d *Driver) volumeProblemsOf(l located) []problem {
	out := d.rootProblems(l.pool, l.pool.own)
	if l.inLegacy() {
		out = append(out, d.rootProblems(l.pool, l.root)...)
	}
	return append(out, unenforcedProblem(l)...)
}

// unusableRootProblems are the unreachable problems of every root that
// cannot be read now.
func (d *Driver) unusableRootProblems() []problem {
	var out []problem
	for _, p := range d.pools {
		for _, r := range p.roots() {
			if _, err := d.storeOf(r); err == nil {
				continue
			}
			for _, pr := range d.rootProblems(p, r) {
				if pr.unreachable {
					out = append(out, pr)
				}
			}
		}
	}
	return out
}

// findMissing finds id among the volumes whose directory vanished behind
// hpp's back (only those with a record are known at all: in a legacy
// directory, those hpp-legacy recorded).
func (d *Driver) findMissing(ctx context.Context, id string) ([]problem, bool, error) {
	for _, p := range d.pools {
		for _, r := range p.roots() {
			store, err := d.storeOf(r)
			if err != nil {
				continue
			}
			missing, err := store.Missing(ctx)
			if err != nil {
				return nil, false, toStatus("listing missing volumes of "+r.named(), err)
			}
			for _, m := range missing {
				if m.ID == id {
					l := located{pool: p, root: r, store: store, vol: m}
					return append(d.volumeProblemsOf(l), missingDirProblem(p, m)), true, nil
				}
			}
		}
	}
	return nil, false, nil
}
