package pools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

// OpenPools opens every pool that can be opened now and returns why the
// others cannot. Call it once before the socket serves: opening is the only
// place that writes to a pool outside a CreateVolume or DeleteVolume call.
// Trash left by a crash is purged in the background, so a restart after
// deleting large VM disks serves at once.
func (rt *Runtime) OpenPools(ctx context.Context) error {
	var errs []error
	for _, p := range rt.pools {
		for _, r := range p.roots() {
			if err := rt.openRoot(ctx, p, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// RetryPools opens, every interval until ctx ends, the pools that could not
// be opened at start (their disk was mounted late). It stops once all are.
func (rt *Runtime) RetryPools(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		waiting := 0
		for _, p := range rt.pools {
			var errs []error
			for _, r := range p.roots() {
				if !r.isOpen() {
					errs = append(errs, rt.openRoot(ctx, p, r))
				}
			}
			if err := errors.Join(errs...); err != nil {
				waiting++
				rt.log.Debug("storage pool still not usable", zap.String("pool", p.name()), zap.Error(err))
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
func (rt *Runtime) openOwnRoot(ctx context.Context, p *poolState) (*dirvol.Store, uint64, error) {
	notReady := func(format string, args ...any) (*dirvol.Store, uint64, error) {
		return nil, 0, &errPoolNotReady{pool: p.cfg.Name, why: fmt.Sprintf(format, args...)}
	}
	parent := filepath.Dir(p.cfg.Path)
	if _, err := rt.deps.FS.DeviceOf(parent); err != nil {
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
	store, err := dirvol.Open(p.cfg.Path, dirvol.Options{Logger: rt.log.Named("dirvol"), PurgeInBackground: true,
		NodeID: rt.cfg.NodeID, Shared: p.cfg.Shared, NotVolumes: notVolumes(p.cfg)})
	if err != nil {
		return notReady("%v", err)
	}
	if err := ensurePoolIdentity(p.cfg, rt.cfg.NodeID); err != nil {
		return notReady("%v", err)
	}
	dev, err := rt.deps.FS.DeviceOf(p.cfg.Path)
	if err != nil {
		return notReady("%v", err)
	}
	report, err := store.Recover(ctx)
	if err != nil {
		return notReady("recovering half-done operations: %v", err)
	}
	rt.log.Info("storage pool opened", zap.String("pool", p.cfg.Name), zap.String("path", p.cfg.Path),
		zap.Bool("shared", p.cfg.Shared), zap.Int("queuedPurges", report.FinishedDeletes),
		zap.Int("removedStaging", report.RemovedStaging), zap.Int("removedOrphanMeta", report.RemovedOrphanMeta),
		zap.Int("migratedRecords", report.MigratedRecords))
	copies, err := rt.openCopies(ctx, p)
	if err != nil {
		return notReady("%v", err)
	}
	var ledger *prjquota.Ledger
	if !p.cfg.EnforceSize {
		rt.liftQuotas(p)
	} else {
		// Never silently unenforced: a filesystem that cannot enforce
		// keeps the pool closed, saying what to add.
		if ledger, err = rt.openLedger(ctx, p, store, dev); err != nil {
			return notReady("%v", err)
		}
	}
	p.mu.Lock()
	p.copies, p.quota = copies, ledger
	p.mu.Unlock()
	return store, dev, nil
}

// openRoot opens r, unless it is open already, and finishes what a crash
// left in it; on failure it keeps the reason for storeOf to report.
func (rt *Runtime) openRoot(ctx context.Context, p *poolState, r *root) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store != nil {
		return nil
	}
	open := rt.openOwnRoot
	if r.legacy {
		open = rt.openLegacyRoot
	}
	store, dev, err := open(ctx, p)
	if err != nil {
		r.notOpen = notOpenReason(err)
		return err
	}
	r.store, r.device, r.notOpen = store, dev, ""
	return nil
}

// notOpenReason is what storeOf says while a directory could not be opened.
func notOpenReason(err error) string {
	var nr *errPoolNotReady
	if errors.As(err, &nr) {
		return nr.why
	}
	return err.Error()
}

// storeOf returns the store of r for a request. It writes nothing: a
// directory that is not open is Unavailable until the runner opens it. One
// stat per call checks that it is still on the filesystem it was opened
// on: if its disk was unmounted, going on would report its volumes as
// deleted and write new ones to the wrong disk.
func (rt *Runtime) storeOf(r *root) (*dirvol.Store, error) {
	r.mu.Lock()
	store, opened, why := r.store, r.device, r.notOpen
	r.mu.Unlock()
	if store == nil {
		return nil, &errPoolNotReady{pool: r.pool.name(), why: why}
	}
	if !r.legacy {
		// Before the device check, so an unmounted pool says so in those words.
		if err := checkMounted(r.pool.cfg); err != nil {
			return nil, err
		}
	}
	dev, err := rt.deps.FS.DeviceOf(r.path)
	if err != nil {
		reason := err.Error()
		if r.legacy {
			reason = "legacy directory " + reason
		}
		if errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("%s %s is gone: its mount disappeared (remount it; hpp-csi does not recreate it)", r.label(), r.path)
		}
		return nil, &errPoolNotReady{pool: r.pool.name(), why: reason}
	}
	if dev != opened {
		return nil, &errPoolNotReady{pool: r.pool.name(), why: fmt.Sprintf(
			"%s is on another filesystem than when it was opened (device %d, was %d): its mount disappeared; remount it (or restart hpp-csi if the pool moved to a new disk on purpose)",
			r.named(), dev, opened)}
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
		return &errPoolNotReady{pool: cfg.Name, why: fmt.Sprintf(
			"it is not mounted: %v; hpp-mounter writes the marker once the pool's PVC is mounted there, and hpp-csi never uses the bare directory", err)}
	}
	return nil
}
