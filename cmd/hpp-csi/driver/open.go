package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

// OpenPools opens every pool that can be opened now and returns why the
// others cannot. Call it once before the socket serves: opening is the only
// place that writes to a pool outside a CreateVolume or DeleteVolume call.
// Trash left by a crash is purged in the background, so a restart after
// deleting large VM disks serves at once.
func (d *Driver) OpenPools(ctx context.Context) error {
	var errs []error
	for _, p := range d.pools {
		for _, r := range p.roots() {
			if err := d.openRoot(ctx, p, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// RetryPools opens, every interval until ctx ends, the pools that could not
// be opened at start (their disk was mounted late). It stops once all are.
func (d *Driver) RetryPools(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		waiting := 0
		for _, p := range d.pools {
			var errs []error
			for _, r := range p.roots() {
				if !r.isOpen() {
					errs = append(errs, d.openRoot(ctx, p, r))
				}
			}
			if err := errors.Join(errs...); err != nil {
				waiting++
				d.log.Debug("storage pool still not usable", zap.String("pool", p.name()), zap.Error(err))
			}
		}
		if waiting == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openOwnRoot makes the pool's volumes directory when its parent exists (as
// the KubeVirt driver does at start), opens it and recovers half-done
// operations. A missing parent is the pool's disk not being mounted:
// creating the directory then would put volumes on the OS disk, so the pool
// stays closed and Probe says why.
func (d *Driver) openOwnRoot(ctx context.Context, p *poolState) (*dirvol.Store, uint64, error) {
	notReady := func(format string, args ...any) (*dirvol.Store, uint64, error) {
		return nil, 0, &errPoolNotReady{pool: p.cfg.Name, reason: fmt.Sprintf(format, args...)}
	}
	parent := filepath.Dir(p.cfg.Path)
	if _, err := d.deps.FS.DeviceOf(parent); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notReady("directory %s, which holds the volumes directory %s, does not exist (is the pool's disk mounted?)", parent, p.cfg.Path)
		}
		return notReady("%v", err)
	}
	// A mounted pool's volumes directory is the mount itself: without the
	// marker it is not mounted, and dirvol.Open would make hpp's areas in
	// the bare directory on the OS disk.
	if err := checkMounted(p.cfg); err != nil {
		return nil, 0, err
	}
	store, err := dirvol.Open(p.cfg.Path, dirvol.Options{Logger: d.log.Named("dirvol"), PurgeInBackground: true,
		NodeID: d.cfg.NodeID, Shared: p.cfg.Shared, NotVolumes: notVolumes(p.cfg)})
	if err != nil {
		return notReady("%v", err)
	}
	if err := ensurePoolIdentity(p.cfg, d.cfg.NodeID); err != nil {
		return notReady("%v", err)
	}
	dev, err := d.deps.FS.DeviceOf(p.cfg.Path)
	if err != nil {
		return notReady("%v", err)
	}
	report, err := store.Recover(ctx)
	if err != nil {
		return notReady("recovering half-done operations: %v", err)
	}
	d.log.Info("storage pool opened", zap.String("pool", p.cfg.Name), zap.String("path", p.cfg.Path),
		zap.Bool("shared", p.cfg.Shared), zap.Int("queuedPurges", report.FinishedDeletes),
		zap.Int("removedStaging", report.RemovedStaging), zap.Int("removedOrphanMeta", report.RemovedOrphanMeta),
		zap.Int("migratedRecords", report.MigratedRecords))
	copies, err := d.openCopies(ctx, p)
	if err != nil {
		return notReady("%v", err)
	}
	var ledger *prjquota.Ledger
	if !p.cfg.EnforceSize {
		d.liftQuotas(p)
	} else {
		// Never silently unenforced: a filesystem that cannot enforce
		// keeps the pool closed, saying what to add.
		if ledger, err = d.openLedger(ctx, p, store, dev); err != nil {
			return notReady("%v", err)
		}
	}
	p.mu.Lock()
	p.copies, p.quota = copies, ledger
	p.mu.Unlock()
	return store, dev, nil
}
