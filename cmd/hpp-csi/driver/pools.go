package driver

import (
	"fmt"
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
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
	// snapshot area (see snapshots.go); set when own is opened.
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
