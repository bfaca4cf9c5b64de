package pools

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

// A pool with enforceSize gives every volume it makes a project quota
// (internal/prjquota): its own project ID, inherited by everything inside,
// and a hard limit equal to its capacity. dirvol stays quota-free; this
// file is the glue: the ledger is opened with the pool's own directory,
// and create, delete, expand, stats and capacity consult it. Legacy
// volumes (legacyPath) are never enforced: hpp-legacy owns them.

// ledger is the pool's project IDs, nil when the pool does not enforce
// sizes (or is not open yet). A create takes a volume's ID in reserve.go.
func (p *poolState) ledger() *prjquota.Ledger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quota
}

// openLedger opens and recovers the pool's project IDs; an error names
// what the filesystem lacks. Called while the pool's own root is opened.
func (rt *Runtime) openLedger(ctx context.Context, p *poolState, store *dirvol.Store, dev uint64) (*prjquota.Ledger, error) {
	if err := rt.refuseOverlappingIDs(p, dev); err != nil {
		return nil, err
	}
	if rt.deps.Quota == nil {
		return nil, errors.New("enforceSize: this hpp-csi was started without a project quota backend")
	}
	l, err := prjquota.Open(prjquota.Options{Root: p.cfg.Path, Range: p.cfg.ProjectIDRange(), Backend: rt.deps.Quota,
		Logger: rt.log.Named("prjquota"), Step: rt.deps.QuotaStep})
	if err != nil {
		return nil, err
	}
	rep, err := l.Recover(ctx, func(ctx context.Context, id string) (string, int64, bool, error) {
		vol, err := store.Get(ctx, id)
		if errors.Is(err, dirvol.ErrNotFound) {
			return "", 0, false, nil
		}
		return vol.Path, vol.CapacityBytes, err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("enforceSize: recovering project quotas: %w", err)
	}
	rt.log.Info("storage pool enforces volume sizes", zap.String("pool", p.name()),
		zap.Uint32("firstProjectID", l.Range().First), zap.Uint32("lastProjectID", l.Range().Last),
		zap.Int("held", rep.Held), zap.Int("released", rep.Released), zap.Int("relabelled", rep.Relabelled), zap.Int("relimited", rep.Relimited))
	return l, nil
}

// liftQuotas clears the limits a pool set while it enforced sizes, once
// it no longer does: left in place, the kernel would keep enforcing them
// and an expansion (which then only records) would not raise them. A
// failure is logged: the pool serves either way.
func (rt *Runtime) liftQuotas(p *poolState) {
	if rt.deps.Quota == nil {
		return
	}
	n, err := prjquota.Lift(p.cfg.Path, rt.deps.Quota)
	if err != nil {
		rt.log.Warn("lifting the project quotas of a pool that no longer enforces sizes failed; clear them by hand (xfs_quota or setquota)",
			zap.String("pool", p.name()), zap.Int("lifted", n), zap.Error(err))
		return
	}
	if n > 0 {
		rt.log.Info("project quotas lifted: the pool no longer enforces sizes", zap.String("pool", p.name()), zap.Int("volumes", n))
	}
}

// refuseOverlappingIDs keeps two enforcing pools on one filesystem from
// handing out the same project IDs.
func (rt *Runtime) refuseOverlappingIDs(p *poolState, dev uint64) error {
	for _, o := range rt.pools {
		if o == p || !o.cfg.EnforceSize || o.own.openedDevice() != dev {
			continue
		}
		if a, b := p.cfg.ProjectIDRange(), o.cfg.ProjectIDRange(); a.Overlaps(b) {
			return fmt.Errorf("enforceSize: pool %q is on the same filesystem as pool %q and their projectIDs overlap (%d-%d and %d-%d); give each its own range in --datadir",
				p.name(), o.name(), a.First, a.Last, b.First, b.Last)
		}
	}
	return nil
}

// step tells a crash test that a step of create, expand or delete is done
// (Deps.QuotaStep; prjquota names its own steps).
func (rt *Runtime) step(name string) {
	if rt.deps.QuotaStep != nil {
		rt.deps.QuotaStep(name)
	}
}

// Delete removes a volume that a lookup found and, once its directory is
// in the trash, gives up its project ID; what names it in errors
// ("volume", "ephemeral volume"). The caller holds its lock.
func (rt *Runtime) Delete(ctx context.Context, l Volume, what string) error {
	if err := l.store.Delete(ctx, l.ID); err != nil {
		return wrap("deleting "+what+" directory", err)
	}
	rt.stats.forget(l.Path)
	if q := l.pool.ledger(); q != nil && !l.InLegacy() {
		rt.step("delete.trashed")
		if err := q.Release(l.ID); err != nil {
			return wrap("releasing the project quota of "+what+" "+l.ID, err)
		}
	}
	return nil
}

// committed is what the pool's enforced volumes may still write (0 for a
// pool that does not enforce).
func (p *poolState) committed() (int64, error) {
	l := p.ledger()
	if l == nil {
		return 0, nil
	}
	return l.Committed()
}

const ReasonSizeNotEnforced = "SizeNotEnforced"

// unenforcedProblem says that a volume of an enforcing pool has no project
// quota: made by the replaced driver or before the pool enforced sizes.
func unenforcedProblem(l Volume) []Problem {
	q := l.pool.ledger()
	if q == nil || l.InLegacy() {
		return nil
	}
	if _, _, ok := q.Held(l.ID); ok {
		return nil
	}
	return []Problem{{Reason: ReasonSizeNotEnforced, Message: fmt.Sprintf(
		"volume %q in storage pool %q has no size limit: it was made before the pool enforced sizes (or by the replaced driver); expanding it (any new size) gives it a project quota",
		l.ID, l.pool.name())}}
}
