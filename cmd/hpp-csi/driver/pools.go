package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// poolState is one configured pool at run time. The pool's own directory is
// never created by the driver: if it is missing, its disk is probably not
// mounted, and creating it would put volumes on the OS disk. The pool is
// opened (its csi/ directory created and half-done operations recovered) the
// first time it is found usable, and Probe stays not-ready until then.
type poolState struct {
	cfg      pool.Pool
	headroom capacity.Headroom

	mu    sync.Mutex
	store *dirvol.Store
	// device is the filesystem the pool lived on when it was opened; a
	// different one later means the pool's mount disappeared.
	device uint64
}

func (p *poolState) name() string { return p.cfg.Name }

// open returns the pool's store, opening it on first use.
func (d *Driver) openPool(ctx context.Context, p *poolState) (*dirvol.Store, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dev, err := d.deps.FS.DeviceOf(p.cfg.Path)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("directory %s does not exist (is its disk mounted?)", p.cfg.Path)
		}
		return nil, &errPoolNotReady{pool: p.cfg.Name, reason: reason}
	}
	if p.store != nil {
		// Checked on every use (one stat): if the pool's disk was
		// unmounted, its directory now sits on another filesystem, and
		// going on would report its volumes as deleted and write new ones
		// to the wrong disk.
		if dev != p.device {
			return nil, &errPoolNotReady{pool: p.cfg.Name, reason: fmt.Sprintf(
				"%s is on another filesystem than when it was opened (device %d, was %d): its mount disappeared; remount it (or restart hpp-csi if the pool moved to a new disk on purpose)",
				p.cfg.Path, dev, p.device)}
		}
		return p.store, nil
	}
	store, err := dirvol.Open(p.cfg.VolumesDir(), dirvol.Options{Logger: d.log.Named("dirvol"), PurgeInBackground: true, NodeID: d.cfg.NodeID})
	if err != nil {
		return nil, &errPoolNotReady{pool: p.cfg.Name, reason: err.Error()}
	}
	report, err := store.Recover(ctx)
	if err != nil {
		return nil, &errPoolNotReady{pool: p.cfg.Name, reason: "recovering half-done operations: " + err.Error()}
	}
	d.log.Info("storage pool opened", zap.String("pool", p.cfg.Name), zap.String("path", p.cfg.Path),
		zap.Int("finishedDeletes", report.FinishedDeletes), zap.Int("removedStaging", report.RemovedStaging),
		zap.Int("removedOrphanMeta", report.RemovedOrphanMeta), zap.Int("migratedRecords", report.MigratedRecords))
	p.store, p.device = store, dev
	return store, nil
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

// findVolume looks for id in every pool, preferring the pool hint (the
// volume context's storagePool) when it is given. Volumes made by the
// KubeVirt driver carry no hint, so the search is the normal path for them.
func (d *Driver) findVolume(ctx context.Context, id, hint string) (*poolState, dirvol.Volume, error) {
	if err := pool.ValidateID(id); err != nil {
		return nil, dirvol.Volume{}, invalidArg("%v", err)
	}
	ordered := d.pools
	if p, ok := d.pool(hint); ok {
		ordered = append([]*poolState{p}, without(d.pools, p)...)
	}
	var notReady error
	for _, p := range ordered {
		store, err := d.openPool(ctx, p)
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
