package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
)

// poolState is one configured pool at run time. It is opened (its
// volumes directory made if needed, half-done operations recovered) by
// OpenPools before the socket serves, or later by RetryPools once its disk
// appears; request handlers only ever read it (see storeOf).
type poolState struct {
	cfg      pool.Pool
	headroom capacity.Headroom

	mu    sync.Mutex
	store *dirvol.Store
	// device is the filesystem the pool lived on when it was opened; a
	// different one later means the pool's mount disappeared.
	device uint64
	// notOpen says why the pool is not open yet ("" once it is).
	notOpen string
	// legacy is the pool's legacyPath, nil without one (legacy.go).
	legacy *legacyRoot
	// copies is how clones and snapshots copy data in this pool, and its
	// snapshot area (see snapshots.go).
	copies poolCopies
}

func (p *poolState) name() string { return p.cfg.Name }

// shared reports whether every node sees this pool's volumes.
func (p *poolState) shared() bool { return p.cfg.Shared }

// storeOf returns the pool's store for a request. It writes nothing: a pool
// that is not open is Unavailable until the runner opens it. One stat per
// call checks that the pool is still on the filesystem it was opened on: if
// its disk was unmounted, going on would report its volumes as deleted and
// write new ones to the wrong disk.
func (d *Driver) storeOf(p *poolState) (*dirvol.Store, error) {
	p.mu.Lock()
	store, opened, why := p.store, p.device, p.notOpen
	p.mu.Unlock()
	if store == nil {
		return nil, &errPoolNotReady{pool: p.cfg.Name, reason: why}
	}
	// Before the device check, so an unmounted pool says so in those words.
	if err := checkMounted(p.cfg); err != nil {
		return nil, err
	}
	dev, err := d.deps.FS.DeviceOf(p.cfg.Path)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("directory %s is gone: its mount disappeared (remount it; hpp-csi does not recreate it)", p.cfg.Path)
		}
		return nil, &errPoolNotReady{pool: p.cfg.Name, reason: reason}
	}
	if dev != opened {
		return nil, &errPoolNotReady{pool: p.cfg.Name, reason: fmt.Sprintf(
			"%s is on another filesystem than when it was opened (device %d, was %d): its mount disappeared; remount it (or restart hpp-csi if the pool moved to a new disk on purpose)",
			p.cfg.Path, dev, opened)}
	}
	return store, nil
}

// checkMounted refuses a pool that hpp-mounter mounts ("mounted": true)
// while its marker is not visible: then the directory is the bare mount
// point on the OS disk, and a volume made there would silently land on it.
func checkMounted(cfg pool.Pool) error {
	if !cfg.Mounted {
		return nil
	}
	if err := poolmarker.Check(cfg.Path, cfg.Name); err != nil {
		return &errPoolNotReady{pool: cfg.Name, reason: fmt.Sprintf(
			"it is not mounted: %v; hpp-mounter writes the marker once the pool's PVC is mounted there, and hpp-csi never uses the bare directory", err)}
	}
	return nil
}

// pool returns the runtime state of the named pool.
func (d *Driver) pool(name string) (*poolState, bool) {
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
	p, _ := d.pool(cfg.Name)
	return p, nil
}

// findOwnVolume looks for id in every pool's own directory, preferring the pool hint (the
// volume context's storagePool) when it is given. Volumes made by the
// KubeVirt driver carry no hint, so the search is the normal path for them.
func (d *Driver) findOwnVolume(ctx context.Context, id, hint string) (*poolState, dirvol.Volume, error) {
	if err := pool.ValidateID(id); err != nil {
		return nil, dirvol.Volume{}, invalidArg("%v", err)
	}
	ordered := d.pools
	if p, ok := d.pool(hint); ok {
		ordered = append([]*poolState{p}, without(d.pools, p)...)
	}
	var notReady error
	for _, p := range ordered {
		store, err := d.storeOf(p)
		if err != nil {
			notReady = err
			continue
		}
		vol, err := store.Get(ctx, id)
		if err == nil {
			return p, vol, nil
		}
		if !errors.Is(err, dirvol.ErrNotFound) {
			return nil, dirvol.Volume{}, toStatus("looking up volume", err)
		}
	}
	if notReady != nil {
		// The volume may be on the pool we cannot see: saying NotFound
		// would let the CO treat it as deleted.
		return nil, dirvol.Volume{}, toStatus("looking up volume "+id, notReady)
	}
	return nil, dirvol.Volume{}, notFound("volume %q does not exist on node %s", id, d.cfg.NodeID)
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
