package driver

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// findVolume finds id among the pools' own volumes (findOwnVolume) and,
// failing that, among the legacy volumes (findLegacy): calls that carry only
// the volume id (DeleteVolume, NodeGetVolumeStats, the health RPCs) cannot
// tell a migrated volume from one hpp-csi made. The two never collide: a
// legacy directory is <pv> or <claim>-<pv> and a CSI one is the PV name,
// and PV names carry the unique claim UID.
func (d *Driver) findVolume(ctx context.Context, id, hint string) (located, error) {
	l, err := d.findOwnVolume(ctx, id, hint)
	if !isNotFound(err) || !d.hasLegacy() {
		return l, err
	}
	return d.findLegacy(ctx, id)
}

// findOwnVolume looks for id in every pool's own directory, preferring the
// pool hint (the volume context's storagePool) when it is given. Volumes
// made by the KubeVirt driver carry no hint, so the search is the normal
// path for them.
func (d *Driver) findOwnVolume(ctx context.Context, id, hint string) (located, error) {
	if err := pool.ValidateID(id); err != nil {
		return located{}, invalidArg("%v", err)
	}
	ordered := d.pools
	if p, ok := d.poolNamed(hint); ok {
		ordered = append([]*poolState{p}, without(d.pools, p)...)
	}
	var notReady error
	for _, p := range ordered {
		store, err := d.storeOf(p.own)
		if err != nil {
			notReady = err
			continue
		}
		vol, err := store.Get(ctx, id)
		if err == nil {
			return located{pool: p, root: p.own, store: store, vol: vol}, nil
		}
		if !errors.Is(err, dirvol.ErrNotFound) {
			return located{}, toStatus("looking up volume", err)
		}
	}
	if notReady != nil {
		// The volume may be on the pool we cannot see: saying NotFound
		// would let the CO treat it as deleted.
		return located{}, toStatus("looking up volume "+id, notReady)
	}
	return located{}, notFound("volume %q does not exist on node %s", id, d.cfg.NodeID)
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

func (d *Driver) hasLegacy() bool {
	for _, p := range d.pools {
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
func (d *Driver) findLegacy(ctx context.Context, id string) (located, error) {
	var found []located
	var notReady error
	for _, p := range d.pools {
		if p.legacy == nil {
			continue
		}
		l, err := d.getLegacy(ctx, p, id)
		switch {
		case err == nil:
			found = append(found, l)
		case status.Code(err) == codes.Unavailable:
			notReady = err
		case isNotFound(err), status.Code(err) == codes.InvalidArgument:
			// Not a legacy volume of this pool (a planted link, or a
			// directory that holds configured storage): not here.
		default:
			return located{}, err
		}
	}
	switch {
	case len(found) > 1:
		paths := make([]string, len(found))
		for i, l := range found {
			paths[i] = l.vol.Path
		}
		return located{}, failedPrecondition(
			"volume %q exists in more than one legacy directory on node %s (%s); hpp-csi does not guess which one the PV means: move the stray copy out of the legacy directories",
			id, d.cfg.NodeID, strings.Join(paths, ", "))
	case notReady != nil:
		return located{}, toStatus("looking up legacy volume "+id, notReady)
	case len(found) == 1:
		return found[0], nil
	}
	return located{}, notFound("volume %q does not exist on node %s", id, d.cfg.NodeID)
}

// getLegacy returns <legacyPath>/<id> of p, resolved as strictly as a
// pool's own volumes (one real directory entry, no link out of legacyPath).
func (d *Driver) getLegacy(ctx context.Context, p *poolState, id string) (located, error) {
	if _, err := d.cfg.Pools.LegacyVolumePath(p.cfg, id); err != nil {
		return located{}, invalidArg("%v", err)
	}
	store, err := d.storeOf(p.legacy)
	if err != nil {
		return located{}, toStatus("legacy volume "+id, err)
	}
	vol, err := store.Get(ctx, id)
	if errors.Is(err, dirvol.ErrNotFound) {
		return located{}, notFound("volume %q does not exist in the legacy directory %s of storage pool %q on node %s (hpp-csi never creates legacy volumes: is their disk mounted?)",
			id, p.legacy.path, p.name(), d.cfg.NodeID)
	}
	if err != nil {
		return located{}, toStatus("looking up legacy volume", err)
	}
	return located{pool: p, root: p.legacy, store: store, vol: vol}, nil
}

// findForContext finds the volume a publish (or capability check) names,
// reading the layout from its volume context: the PV says where the
// directory is, so nothing is searched for. It also says whether
// multi-node access modes are fine: for a shared pool, and for a legacy
// volume, whose PV hpp-migrate carried over from the legacy provisioner
// (which took ReadWriteMany to mean many pods on this one node) and pinned
// to one node anyway.
func (d *Driver) findForContext(ctx context.Context, id string, volCtx map[string]string) (located, bool, error) {
	switch layout := volCtx[contract.VolumeContextLayout]; layout {
	case "":
		// Without the layout the PV names a volume hpp-csi made (or the
		// KubeVirt driver did): a legacy directory of that name is not it.
		l, err := d.findOwnVolume(ctx, id, volCtx[contract.ParamStoragePool])
		if err != nil {
			return located{}, false, err
		}
		return l, l.pool.shared(), nil
	case contract.LayoutLegacy:
		p, err := d.legacyPool(volCtx[contract.ParamStoragePool])
		if err != nil {
			return located{}, false, err
		}
		l, err := d.getLegacy(ctx, p, id)
		return l, true, err
	default:
		return located{}, false, invalidArg("volume_context: %s %q is not a layout hpp-csi knows; the only one is %q (absent for volumes hpp-csi made)",
			contract.VolumeContextLayout, layout, contract.LayoutLegacy)
	}
}

// legacyPool is the pool a legacy volume's attributes name.
func (d *Driver) legacyPool(name string) (*poolState, error) {
	if name == "" {
		return nil, invalidArg("volume_context: %s is required with %s=%s (the pool whose legacyPath holds the directory)",
			contract.ParamStoragePool, contract.VolumeContextLayout, contract.LayoutLegacy)
	}
	p, ok := d.poolNamed(name)
	if !ok {
		return nil, failedPrecondition("volume_context: %s %q is not a storage pool on node %s; available pools: %s",
			contract.ParamStoragePool, name, d.cfg.NodeID, poolNames(d.cfg.Pools))
	}
	if p.legacy == nil {
		return nil, failedPrecondition("storage pool %q on node %s has no legacyPath, so it cannot serve migrated legacy volumes: set \"legacyPath\" in --datadir to the legacy provisioner's PV_DIR",
			name, d.cfg.NodeID)
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

// poolNamed returns the runtime state of the named pool.
func (d *Driver) poolNamed(name string) (*poolState, bool) {
	for _, p := range d.pools {
		if p.cfg.Name == name {
			return p, true
		}
	}
	return nil, false
}

// selectPool applies the storagePool rules of the compatibility contract.
func (d *Driver) selectPool(storagePool string) (*poolState, error) {
	cfg, err := d.cfg.Pools.Select(storagePool)
	if err != nil {
		return nil, invalidArg("%v", err)
	}
	p, _ := d.poolNamed(cfg.Name)
	return p, nil
}
