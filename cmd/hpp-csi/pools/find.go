package pools

import (
	"context"
	"errors"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Find finds id among the pools' own volumes (FindOwn) and, failing
// that, among the legacy volumes (findLegacy): calls that carry only
// the volume id (DeleteVolume, NodeGetVolumeStats, the health RPCs) cannot
// tell a migrated volume from one hpp-csi made. The two never collide: a
// legacy directory is <pv> or <claim>-<pv> and a CSI one is the PV name,
// and PV names carry the unique claim UID.
func (rt *Runtime) Find(ctx context.Context, id string) (Volume, error) {
	l, err := rt.FindOwn(ctx, id, "")
	if !isNotFound(err) || !rt.hasLegacy() {
		return l, err
	}
	return rt.findLegacy(ctx, id)
}

// FindOwn looks for id in every pool's own directory, preferring the
// pool hint (the volume context's storagePool) when it is given. Volumes
// made by the KubeVirt driver carry no hint, so the search is the normal
// path for them.
func (rt *Runtime) FindOwn(ctx context.Context, id, hint string) (Volume, error) {
	if err := pool.ValidateID(id); err != nil {
		return Volume{}, refuse(Invalid, "%v", err)
	}
	ordered := rt.pools
	if p, ok := rt.poolNamed(hint); ok {
		ordered = append([]*poolState{p}, without(rt.pools, p)...)
	}
	var notReady error
	for _, p := range ordered {
		store, err := rt.storeOf(p.own)
		if err != nil {
			notReady = err
			continue
		}
		vol, err := store.Get(ctx, id)
		if err == nil {
			return Volume{pool: p, root: p.own, store: store, Volume: vol}, nil
		}
		if !errors.Is(err, dirvol.ErrNotFound) {
			return Volume{}, wrap("looking up volume", err)
		}
	}
	if notReady != nil {
		// The volume may be on the pool we cannot see: saying NotFound
		// would let the CO treat it as deleted.
		return Volume{}, wrap("looking up volume "+id, notReady)
	}
	return Volume{}, refuse(NotFound, "volume %q does not exist on node %s", id, rt.cfg.NodeID)
}

func without(pools []*poolState, skip *poolState) []*poolState {
	out := make([]*poolState, 0, len(pools))
	for _, p := range pools {
		if p != skip {
			out = append(out, p)
		}
	}
	return out
}

func (rt *Runtime) hasLegacy() bool {
	for _, p := range rt.pools {
		if p.legacy != nil {
			return true
		}
	}
	return false
}

// findLegacy looks id up as <legacyPath>/<id> in every pool that has one.
// Found in two places is refused, never guessed: deleting the wrong one
// would lose someone's data. A legacy directory that cannot be read makes
// the answer Unavailable, not NotFound: the volume may be there, and
// NotFound would let the CO treat it as deleted.
func (rt *Runtime) findLegacy(ctx context.Context, id string) (Volume, error) {
	var found []Volume
	var notReady error
	for _, p := range rt.pools {
		if p.legacy == nil {
			continue
		}
		l, err := rt.getLegacy(ctx, p, id)
		switch {
		case err == nil:
			found = append(found, l)
		case KindOf(err) == Unavailable:
			notReady = err
		case isNotFound(err), KindOf(err) == Invalid:
			// Not a legacy volume of this pool (a planted link, or a
			// directory that holds configured storage): not here.
		default:
			return Volume{}, err
		}
	}
	switch {
	case len(found) > 1:
		paths := make([]string, len(found))
		for i, l := range found {
			paths[i] = l.Path
		}
		return Volume{}, refuse(Precondition,
			"volume %q exists in more than one legacy directory on node %s (%s); hpp-csi does not guess which one the PV means: move the stray copy out of the legacy directories",
			id, rt.cfg.NodeID, strings.Join(paths, ", "))
	case notReady != nil:
		return Volume{}, wrap("looking up legacy volume "+id, notReady)
	case len(found) == 1:
		return found[0], nil
	}
	return Volume{}, refuse(NotFound, "volume %q does not exist on node %s", id, rt.cfg.NodeID)
}

// getLegacy returns <legacyPath>/<id> of p, resolved as strictly as a
// pool's own volumes (one real directory entry, no link out of legacyPath).
func (rt *Runtime) getLegacy(ctx context.Context, p *poolState, id string) (Volume, error) {
	if _, err := rt.cfg.Pools.LegacyVolumePath(p.cfg, id); err != nil {
		return Volume{}, refuse(Invalid, "%v", err)
	}
	store, err := rt.storeOf(p.legacy)
	if err != nil {
		return Volume{}, wrap("legacy volume "+id, err)
	}
	vol, err := store.Get(ctx, id)
	if errors.Is(err, dirvol.ErrNotFound) {
		return Volume{}, refuse(NotFound, "volume %q does not exist in the legacy directory %s of storage pool %q on node %s (hpp-csi never creates legacy volumes: is their disk mounted?)",
			id, p.legacy.path, p.name(), rt.cfg.NodeID)
	}
	if err != nil {
		return Volume{}, wrap("looking up legacy volume", err)
	}
	return Volume{pool: p, root: p.legacy, store: store, Volume: vol}, nil
}

// FindLegacy returns the legacy volume id of the pool a published legacy
// volume's attributes name: its PV says where the directory is, so nothing
// is searched for.
func (rt *Runtime) FindLegacy(ctx context.Context, poolName, id string) (Volume, error) {
	p, err := rt.legacyPool(poolName)
	if err != nil {
		return Volume{}, err
	}
	return rt.getLegacy(ctx, p, id)
}

// legacyPool is the pool a legacy volume's attributes name.
func (rt *Runtime) legacyPool(name string) (*poolState, error) {
	p, ok := rt.poolNamed(name)
	if !ok {
		return nil, refuse(Precondition, "volume_context: %s %q is not a storage pool on node %s; available pools: %s",
			contract.ParamStoragePool, name, rt.cfg.NodeID, poolNames(rt.cfg.Pools))
	}
	if p.legacy == nil {
		return nil, refuse(Precondition, "storage pool %q on node %s has no legacyPath, so it cannot serve migrated legacy volumes: set \"legacyPath\" in --datadir to the legacy provisioner's PV_DIR",
			name, rt.cfg.NodeID)
	}
	return p, nil
}

func poolNames(s *pool.Set) string {
	var names []string
	for _, p := range s.All() {
		names = append(names, "\""+p.Name+"\"")
	}
	return strings.Join(names, ", ")
}
