package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

const (
	reasonLegacyPathMissing = "LegacyPathMissing"
	reasonLegacyMountLost   = "LegacyMountLost"
)

// legacyProblems inspects a pool's legacy directory: whether it is there,
// still on the filesystem it was opened on and, when that is not the pool's
// own filesystem (whose space poolProblems already checks), its free space.
func (d *Driver) legacyProblems(p *poolState) []problem {
	r := p.legacy
	if r == nil {
		return nil
	}
	r.mu.Lock()
	opened := r.device
	r.mu.Unlock()
	dev, err := d.deps.FS.DeviceOf(r.path)
	if err != nil {
		msg := fmt.Sprintf("storage pool %q: cannot stat legacy directory %s: %v", p.name(), r.path, err)
		reason := reasonLegacyPathMissing
		switch {
		case errors.Is(err, fs.ErrNotExist) && opened != 0:
			reason = reasonLegacyMountLost
			msg = fmt.Sprintf("storage pool %q: legacy directory %s was there when it was opened and is gone now; its mount disappeared (remount it; hpp-csi does not recreate it)", p.name(), r.path)
		case errors.Is(err, fs.ErrNotExist):
			msg = fmt.Sprintf("storage pool %q: legacy directory %s is missing; mount the disk of the legacy volumes", p.name(), r.path)
		}
		return []problem{{unreachable: true, reason: reason, message: msg}}
	}
	if opened != 0 && dev != opened {
		return []problem{{unreachable: true, reason: reasonLegacyMountLost, message: fmt.Sprintf(
			"storage pool %q: legacy directory %s is now on another filesystem (device %d, was %d); its mount disappeared",
			p.name(), r.path, dev, opened)}}
	}
	if own, err := d.deps.FS.DeviceOf(p.cfg.Path); err == nil && own == dev {
		return nil
	}
	st, err := d.deps.FS.Statfs(r.path)
	if err != nil {
		return []problem{{unreachable: true, reason: reasonLegacyPathMissing, message: fmt.Sprintf("storage pool %q: statfs of legacy directory %s: %v", p.name(), r.path, err)}}
	}
	out := spaceProblems(p, st)
	for i := range out {
		out[i].message = fmt.Sprintf("legacy directory %s: %s", r.path, out[i].message)
	}
	return out
}

// volumeProblemsOf are the problems of a volume found in p: its pool's,
// and its legacy directory's when it lives there.
func (d *Driver) volumeProblemsOf(p *poolState, vol dirvol.Volume) []problem {
	out := d.poolProblems(p)
	if isLegacyVolume(p, vol) {
		out = append(out, d.legacyProblems(p)...)
	}
	return out
}

// unusableLegacyProblems are the unreachable problems of legacy
// directories that cannot be read now.
func (d *Driver) unusableLegacyProblems() []problem {
	var out []problem
	for _, p := range d.pools {
		if p.legacy == nil {
			continue
		}
		if _, err := d.legacyStoreOf(p); err == nil {
			continue
		}
		for _, pr := range d.legacyProblems(p) {
			if pr.unreachable {
				out = append(out, pr)
			}
		}
	}
	return out
}

// missingLegacy finds id among the legacy volumes whose directory vanished
// behind hpp's back (only those with a record, written by hpp-legacy, are
// known at all).
func (d *Driver) missingLegacy(ctx context.Context, id string) ([]problem, bool, error) {
	for _, p := range d.pools {
		if p.legacy == nil {
			continue
		}
		store, err := d.legacyStoreOf(p)
		if err != nil {
			continue
		}
		missing, err := store.Missing(ctx)
		if err != nil {
			return nil, false, toStatus("listing missing legacy volumes", err)
		}
		for _, m := range missing {
			if m.ID == id {
				return append(d.volumeProblemsOf(p, m), missingDirProblem(p, m)), true, nil
			}
		}
	}
	return nil, false, nil
}

// legacyReserved is what the pool's legacy volumes requested but have not
// written yet, when they share the pool's filesystem (elsewhere they take
// nothing from the pool's free space). Only volumes hpp-legacy recorded
// have a known request, and the guest store's sum is what the directory
// held when hpp-csi opened it, less what hpp-csi deleted since: volumes
// hpp-legacy makes or deletes later are not seen until a restart (it
// checks its own capacity when it creates; an entry it deleted only makes
// this offer less, never more).
func (d *Driver) legacyReserved(p *poolState) int64 {
	if p.legacy == nil {
		return 0
	}
	store, err := d.legacyStoreOf(p)
	if err != nil {
		return 0
	}
	p.legacy.mu.Lock()
	dev := p.legacy.device
	p.legacy.mu.Unlock()
	if own, err := d.deps.FS.DeviceOf(p.cfg.Path); err != nil || own != dev {
		return 0
	}
	return store.Reserved()
}

// noteLegacyUsage is noteUsage for volumes in legacy directories.
func (d *Driver) noteLegacyUsage(dir, id string, u dirvol.Usage) {
	for _, p := range d.pools {
		if p.legacy == nil || p.legacy.path != dir {
			continue
		}
		p.legacy.mu.Lock()
		store := p.legacy.store
		p.legacy.mu.Unlock()
		if store != nil {
			store.NoteUsage(id, u.Bytes)
		}
		return
	}
}
