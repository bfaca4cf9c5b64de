package pools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Reasons are CamelCase per the CSI spec; messages say what to do.
const (
	ReasonPoolPathMissing   = "PoolPathMissing"
	ReasonPoolMountLost     = "PoolMountLost"
	ReasonLegacyPathMissing = "LegacyPathMissing"
	ReasonLegacyMountLost   = "LegacyMountLost"
)

// missingReasons are the reasons for a root that cannot be reached: never
// there, or gone since it was opened.
func (r *root) missingReasons() (missing, lost string) {
	if r.legacy {
		return ReasonLegacyPathMissing, ReasonLegacyMountLost
	}
	return ReasonPoolPathMissing, ReasonPoolMountLost
}

// rootProblems inspects one of p's roots as it is now: its directory,
// whether it is still on the filesystem it was opened on, free space and
// inodes. A legacy directory on the pool's own filesystem adds no space
// problems: the pool's own directory reports them.
func (rt *Runtime) rootProblems(p *poolState, r *root) []Problem {
	if r == nil {
		return nil
	}
	opened := r.openedDevice()
	missing, lost := r.missingReasons()
	dev, err := rt.deps.FS.DeviceOf(r.path)
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
		return []Problem{{Unreachable: true, Reason: reason, Message: msg}}
	}
	if opened != 0 && dev != opened {
		return []Problem{{Unreachable: true, Reason: lost, Message: fmt.Sprintf(
			"storage pool %q: %s is now on another filesystem (device %d, was %d); its mount disappeared and writes would land on the wrong disk",
			p.name(), r.named(), dev, opened)}}
	}
	if r.legacy {
		if own, err := rt.deps.FS.DeviceOf(p.cfg.Path); err == nil && own == dev {
			return nil
		}
	}
	st, err := rt.deps.FS.Statfs(r.path)
	if err != nil {
		return []Problem{{Unreachable: true, Reason: missing, Message: fmt.Sprintf("storage pool %q: statfs of %s: %v", p.name(), r.named(), err)}}
	}
	out := spaceProblems(p, st)
	if r.legacy {
		for i := range out {
			out[i].Message = fmt.Sprintf("legacy directory %s: %s", r.path, out[i].Message)
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

// volumeProblemsOf are the problems of a volume a lookup found: its pool's own
// directory's, and its legacy directory's when it lives there.
func (rt *Runtime) volumeProblemsOf(l Volume) []Problem {
	out := rt.rootProblems(l.pool, l.pool.own)
	if l.InLegacy() {
		out = append(out, rt.rootProblems(l.pool, l.root)...)
	}
	return append(out, unenforcedProblem(l)...)
}

// unusableRootProblems are the unreachable problems of every root that
// cannot be read now.
func (rt *Runtime) unusableRootProblems() []Problem {
	var out []Problem
	for _, p := range rt.pools {
		for _, r := range p.roots() {
			if _, err := rt.storeOf(r); err == nil {
				continue
			}
			for _, pr := range rt.rootProblems(p, r) {
				if pr.Unreachable {
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
func (rt *Runtime) findMissing(ctx context.Context, id string) ([]Problem, bool, error) {
	for _, p := range rt.pools {
		for _, r := range p.roots() {
			store, err := rt.storeOf(r)
			if err != nil {
				continue
			}
			missing, err := store.Missing(ctx)
			if err != nil {
				return nil, false, wrap("listing missing volumes of "+r.named(), err)
			}
			for _, m := range missing {
				if m.ID == id {
					l := Volume{pool: p, root: r, store: store, Volume: m}
					return append(rt.volumeProblemsOf(l), missingDirProblem(p, m)), true, nil
				}
			}
		}
	}
	return nil, false, nil
}

// VolumeProblems finds what is wrong with one volume: its pool's problems
// plus its own directory. A volume whose metadata survives but whose
// directory is gone was removed behind the driver's back.
func (rt *Runtime) VolumeProblems(ctx context.Context, id string) ([]Problem, error) {
	if pr, ok := rt.mismatches.get(id); ok {
		// Its data is on another disk: nothing here describes it.
		return []Problem{pr}, nil
	}
	l, err := rt.Find(ctx, id)
	if err == nil {
		return rt.volumeProblemsOf(l), nil
	}
	if KindOf(err) == Unavailable {
		// Not on any usable pool, and some pool cannot be read: the
		// volume is most likely there, and that pool's problem is its.
		return rt.unusableRootProblems(), nil
	}
	if !isNotFound(err) {
		return nil, err
	}
	if problems, ok, merr := rt.findMissing(ctx, id); ok || merr != nil {
		return problems, merr
	}
	return nil, err
}

// VolumeWithProblems is a volume of a pool's own directory and what is
// wrong with it.
type VolumeWithProblems struct {
	Volume   Volume
	Problems []Problem
}

// Unhealthy lists the volumes of every usable pool's own directory that
// have a problem, those whose directory vanished included, in (pool
// order, id) order.
func (rt *Runtime) Unhealthy(ctx context.Context) ([]VolumeWithProblems, error) {
	var out []VolumeWithProblems
	for _, p := range rt.usable() {
		poolProblems := rt.rootProblems(p.poolState, p.own)
		vols, err := p.store.List(ctx)
		if err != nil {
			return nil, wrap("listing volumes of pool "+p.name(), err)
		}
		missing, err := p.store.Missing(ctx)
		if err != nil {
			return nil, wrap("listing missing volumes of pool "+p.name(), err)
		}
		for _, v := range mergeByID(vols, missing) {
			l := Volume{pool: p.poolState, root: p.own, store: p.store, Volume: v.Volume}
			problems := append([]Problem(nil), poolProblems...)
			if v.missing {
				problems = append(problems, missingDirProblem(p.poolState, v.Volume))
			} else {
				problems = append(problems, unenforcedProblem(l)...)
			}
			if len(problems) > 0 {
				out = append(out, VolumeWithProblems{Volume: l, Problems: problems})
			}
		}
	}
	return out, nil
}

type maybeMissing struct {
	dirvol.Volume
	missing bool
}

// mergeByID merges two id-sorted lists so paging stays in id order.
func mergeByID(present, missing []dirvol.Volume) []maybeMissing {
	out := make([]maybeMissing, 0, len(present)+len(missing))
	i, j := 0, 0
	for i < len(present) || j < len(missing) {
		if j >= len(missing) || i < len(present) && present[i].ID < missing[j].ID {
			out = append(out, maybeMissing{Volume: present[i]})
			i++
			continue
		}
		out = append(out, maybeMissing{Volume: missing[j], missing: true})
		j++
	}
	return out
}

// StorageProblems are the problems of every pool's directories, own and
// legacy, in pool order.
func (rt *Runtime) StorageProblems() []Problem {
	var out []Problem
	for _, p := range rt.pools {
		out = append(out, rt.rootProblems(p, p.own)...)
		out = append(out, rt.rootProblems(p, p.legacy)...)
	}
	return out
}

// Ready returns nil when every pool is open and healthy enough to serve, or
// an error naming each pool that is not (for Probe, /healthz and logs).
//
// A pool that hpp-mounter mounts ("mounted": true) does not count: it is
// unmounted by design until its mounter pod runs, and while a mounter is
// replaced. Counting it would fail the liveness probe (kubelet restarting
// the driver in a loop) and hold csi-provisioner, which waits for Probe,
// away from the node's other pools. Such a pool is refused per request
// instead (Unavailable, naming the missing marker), offers zero capacity,
// and its mounter's own readiness says whether it is mounted.
func (rt *Runtime) Ready(_ context.Context) error {
	var problems []string
	for _, p := range rt.pools {
		if p.cfg.Mounted {
			continue
		}
		if _, err := rt.storeOf(p.own); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, pr := range rt.rootProblems(p, p.own) {
			if pr.Unreachable {
				problems = append(problems, pr.Message)
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
