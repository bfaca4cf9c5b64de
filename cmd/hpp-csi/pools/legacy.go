package pools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Volumes that hpp-migrate moved from the legacy provisioner stay where they
// are, in a pool's legacyPath (the legacy provisioner's PV_DIR), and their PV
// says so in its volume attributes: storagePool plus
// hostpath.csi/layout=legacy (contract.VolumeContextLayout,
// contract.LayoutLegacy; cmd/hpp-migrate/README.md, "Contract with
// hpp-csi"). hpp-csi publishes, measures, reports on and deletes them in
// place and never creates one.

// legacyTagSuffix makes hpp-csi's staging and trash names in a legacy
// directory differ from hpp-legacy's ("local." with no node id).
const legacyTagSuffix = ".hpp-csi"

// openLegacyRoot opens a pool's legacy directory and finishes what a crash
// of hpp-csi left in it. hpp-legacy may still serve the PVs not migrated
// yet from the same directory, with its own dirvol Store, so hpp-csi opens
// it as a guest (see internal/dirvol/guest.go for why a plain Store there
// would break hpp-legacy's creates) with a tag of its own in staging and
// trash names. The directory must exist: it holds data, and a missing one
// is an unmounted disk, so it is never created.
func (rt *Runtime) openLegacyRoot(ctx context.Context, p *poolState) (*dirvol.Store, uint64, error) {
	path := p.legacy.path
	notReady := func(format string, args ...any) (*dirvol.Store, uint64, error) {
		return nil, 0, &errPoolNotReady{pool: p.name(), why: "legacy directory " + fmt.Sprintf(format, args...)}
	}
	dev, err := rt.deps.FS.DeviceOf(path)
	if errors.Is(err, fs.ErrNotExist) {
		return notReady("%s does not exist (is the disk of the legacy volumes mounted?); hpp-csi never creates it", path)
	}
	if err != nil {
		return notReady("%s: %v", path, err)
	}
	store, err := dirvol.Open(path, dirvol.Options{Logger: rt.log.Named("dirvol-legacy"), PurgeInBackground: true,
		NodeID: rt.cfg.NodeID + legacyTagSuffix, Guest: true})
	if err != nil {
		return notReady("%v", err)
	}
	report, err := store.Recover(ctx)
	if err != nil {
		return notReady("%s: recovering half-done deletes: %v", path, err)
	}
	rt.log.Info("legacy directory opened", zap.String("pool", p.name()), zap.String("path", path),
		zap.Int("queuedPurges", report.FinishedDeletes))
	return store, dev, nil
}

// legacyReserved is what the pool's legacy volumes requested but have not
// written yet, when they share the pool's filesystem (elsewhere they take
// nothing from the pool's free space). Only volumes hpp-legacy recorded
// have a known request, and the guest store's sum is what the directory
// held when hpp-csi opened it, less what hpp-csi deleted since: volumes
// hpp-legacy makes or deletes later are not seen until a restart (it
// checks its own capacity when it creates; an entry it deleted only makes
// this offer less, never more).
func (rt *Runtime) legacyReserved(p *poolState) int64 {
	if p.legacy == nil {
		return 0
	}
	store, err := rt.storeOf(p.legacy)
	if err != nil {
		return 0
	}
	if own, err := rt.deps.FS.DeviceOf(p.cfg.Path); err != nil || own != p.legacy.openedDevice() {
		return 0
	}
	return store.Reserved()
}
