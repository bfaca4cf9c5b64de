package pools

import (
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/snapshot"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// poolState is one configured pool at run time: its own volumes directory
// and, with a legacyPath, the legacy provisioner's directory (root.go).
// Request handlers only ever read it.
type poolState struct {
	cfg      pool.Pool
	headroom capacity.Headroom

	// own holds the volumes hpp-csi makes; legacy is the pool's legacyPath,
	// nil without one.
	own    *root
	legacy *root

	mu sync.Mutex
	// copies is how clones and snapshots copy data in this pool, and its
	// snapshot area (see copies.go); set when own is opened.
	copies poolCopies
	// quota is the pool's project IDs when it enforces sizes (quota.go);
	// set when own is opened.
	quota *prjquota.Ledger
}

func newPoolState(cfg pool.Pool) *poolState {
	p := &poolState{cfg: cfg, headroom: capacity.Headroom{Bytes: cfg.ReservedBytes, Percent: cfg.ReservedPercent}}
	p.own = newRoot(p, cfg.Path, false)
	if cfg.LegacyPath != "" {
		p.legacy = newRoot(p, cfg.LegacyPath, true)
	}
	return p
}

func (p *poolState) name() string { return p.cfg.Name }

// shared reports whether every node sees this pool's volumes.
func (p *poolState) shared() bool { return p.cfg.Shared }

// roots are the pool's directories of volumes: its own, then its legacyPath.
func (p *poolState) roots() []*root {
	if p.legacy == nil {
		return []*root{p.own}
	}
	return []*root{p.own, p.legacy}
}

// poolCopies is what a pool copies with: reflink when its filesystem can
// (probed once when the pool is opened), and its snapshot area when the
// pool takes snapshots (nil otherwise).
type poolCopies struct {
	mode  treecopy.Mode
	snaps *snapshot.Store
	// cache keeps sources fetched from other nodes (clonecache.go); nil
	// for a shared pool, or when it could not be opened.
	cache *clonecache.Cache
}

// copyMode is how clones and snapshots copy data in this pool.
func (p *poolState) copyMode() treecopy.Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copies.mode
}

// cloneCache is the pool's cache of sources fetched from other nodes, nil
// when it has none.
func (p *poolState) cloneCache() *clonecache.Cache {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copies.cache
}

// snapshots is the pool's snapshot area, nil when it takes none (or is
// not open yet).
func (p *poolState) snapshots() *snapshot.Store {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copies.snaps
}

// poolNamed returns the runtime state of the named pool.
func (rt *Runtime) poolNamed(name string) (*poolState, bool) {
	for _, p := range rt.pools {
		if p.cfg.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Index is the named pool's place in the configuration (-1 for none):
// listings are in this order, so that pages can be cut by position.
func (rt *Runtime) Index(name string) int {
	for i, p := range rt.pools {
		if p.name() == name {
			return i
		}
	}
	return -1
}

// usablePool is a pool whose own directory can be read now, with its store.
type usablePool struct {
	*poolState
	store *dirvol.Store
}

// usable lists, in pool order, the pools whose own directory can be read
// now: listings pass over the others (their volumes reappear once the
// disk is back).
func (rt *Runtime) usable() []usablePool {
	var out []usablePool
	for _, p := range rt.pools {
		if store, err := rt.storeOf(p.own); err == nil {
			out = append(out, usablePool{poolState: p, store: store})
		}
	}
	return out
}
