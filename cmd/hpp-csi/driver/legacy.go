package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Volumes that hpp-migrate moved from the legacy provisioner stay where they
// are, in a pool's legacyPath (the legacy provisioner's PV_DIR), and their PV
// says so in its volume attributes: storagePool plus
// hostpath.csi/layout=legacy (contract.VolumeContextLayout,
// contract.LayoutLegacy; cmd/hpp-migrate/README.md, "Contract with
// hpp-csi"). hpp-csi publishes, measures, reports on and deletes them in
// place and never creates one.

// legacyRoot is a pool's legacyPath at run time. hpp-legacy may still serve
// the PVs not migrated yet from the same directory, with its own dirvol
// Store, so hpp-csi opens it as a guest (see internal/dirvol/guest.go for
// why a plain Store there would break hpp-legacy's creates) with a tag of
// its own in staging and trash names.
type legacyRoot struct {
	path string

	mu     sync.Mutex
	store  *dirvol.Store
	device uint64
	// notOpen says why the directory is not open yet ("" once it is).
	notOpen string
}

func newLegacyRoot(p pool.Pool) *legacyRoot {
	if p.LegacyPath == "" {
		return nil
	}
	return &legacyRoot{path: p.LegacyPath, notOpen: "not opened yet"}
}

// legacyTagSuffix makes hpp-csi's staging and trash names in a legacy
// directory differ from hpp-legacy's ("local." with no node id).
const legacyTagSuffix = ".hpp-csi"

func (r *legacyRoot) isOpen() bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.store != nil
}

// openLegacy opens a pool's legacy directory, if it has one, and finishes
// what a crash of hpp-csi left in it. The directory must exist: it holds
// data, and a missing one is an unmounted disk, so it is never created.
func (d *Driver) openLegacy(ctx context.Context, p *poolState) error {
	r := p.legacy
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store != nil {
		return nil
	}
	err := d.openLegacyLocked(ctx, p.name(), r)
	if err != nil {
		r.notOpen = notOpenReason(err)
	}
	return err
}

// notOpenReason is what storeOf and legacyStoreOf say while a directory
// could not be opened.
func notOpenReason(err error) string {
	var nr *errPoolNotReady
	if errors.As(err, &nr) {
		return nr.reason
	}
	return err.Error()
}

func (d *Driver) openLegacyLocked(ctx context.Context, poolName string, r *legacyRoot) error {
	notReady := func(format string, args ...any) error {
		return &errPoolNotReady{pool: poolName, reason: "legacy directory " + fmt.Sprintf(format, args...)}
	}
	dev, err := d.deps.FS.DeviceOf(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return notReady("%s does not exist (is the disk of the legacy volumes mounted?); hpp-csi never creates it", r.path)
	}
	if err != nil {
		return notReady("%s: %v", r.path, err)
	}
	store, err := dirvol.Open(r.path, dirvol.Options{Logger: d.log.Named("dirvol-legacy"), PurgeInBackground: true,
		NodeID: d.cfg.NodeID + legacyTagSuffix, Guest: true})
	if err != nil {
		return notReady("%v", err)
	}
	report, err := store.Recover(ctx)
	if err != nil {
		return notReady("%s: recovering half-done deletes: %v", r.path, err)
	}
	d.log.Info("legacy directory opened", zap.String("pool", poolName), zap.String("path", r.path),
		zap.Int("queuedPurges", report.FinishedDeletes))
	r.store, r.device, r.notOpen = store, dev, ""
	return nil
}

// legacyStoreOf is storeOf for a pool's legacy directory: it writes nothing,
// and refuses a directory whose mount disappeared since it was opened.
func (d *Driver) legacyStoreOf(p *poolState) (*dirvol.Store, error) {
	r := p.legacy
	r.mu.Lock()
	store, opened, why := r.store, r.device, r.notOpen
	r.mu.Unlock()
	if store == nil {
		return nil, &errPoolNotReady{pool: p.name(), reason: why}
	}
	dev, err := d.deps.FS.DeviceOf(r.path)
	if err != nil {
		reason := "legacy directory " + err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("legacy directory %s is gone: its mount disappeared (remount it; hpp-csi does not recreate it)", r.path)
		}
		return nil, &errPoolNotReady{pool: p.name(), reason: reason}
	}
	if dev != opened {
		return nil, &errPoolNotReady{pool: p.name(), reason: fmt.Sprintf(
			"legacy directory %s is on another filesystem than when it was opened (device %d, was %d): its mount disappeared; remount it",
			r.path, dev, opened)}
	}
	return store, nil
}

// isLegacyVolume reports whether vol, found in p, lives in p's legacy
// directory rather than in its volumes directory.
func isLegacyVolume(p *poolState, vol dirvol.Volume) bool {
	return p.legacy != nil && filepath.Dir(vol.Path) == p.legacy.path
}

// storeHolding returns the store whose root holds vol.
func (d *Driver) storeHolding(p *poolState, vol dirvol.Volume) (*dirvol.Store, error) {
	if isLegacyVolume(p, vol) {
		return d.legacyStoreOf(p)
	}
	return d.storeOf(p)
}

// rootOf is the directory vol lives in, for statfs.
func rootOf(p *poolState, vol dirvol.Volume) string {
	if isLegacyVolume(p, vol) {
		return p.legacy.path
	}
	return p.cfg.Path
}
