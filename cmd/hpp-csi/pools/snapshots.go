package pools

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/snapshot"
)

// Snapshots are node-local: a snapshot is a copy of a volume directory in
// the snapshot area of the volume's pool, on the volume's node (copies.go
// opens the areas).

// PoolSnapshot is a snapshot with the name of its pool.
type PoolSnapshot struct {
	Pool string
	snapshot.Snapshot
}

// FindSnapshot looks for id in every pool's snapshot area. Like Find, a
// pool that cannot be read makes the answer Unavailable rather than
// NotFound, which the CO would take as deleted.
func (rt *Runtime) FindSnapshot(ctx context.Context, id string) (PoolSnapshot, error) {
	p, snap, err := rt.findSnapshot(ctx, id)
	if err != nil {
		return PoolSnapshot{}, err
	}
	return PoolSnapshot{Pool: p.name(), Snapshot: snap}, nil
}

func (rt *Runtime) findSnapshot(ctx context.Context, id string) (*poolState, snapshot.Snapshot, error) {
	var notReady error
	for _, p := range rt.pools {
		if !snapshotsOn(p.cfg) {
			continue
		}
		if _, err := rt.storeOf(p.own); err != nil {
			notReady = err
			continue
		}
		snaps := p.snapshots()
		if snaps == nil {
			continue
		}
		snap, err := snaps.Get(ctx, id)
		if err == nil {
			return p, snap, nil
		}
		if !errors.Is(err, snapshot.ErrNotFound) {
			return nil, snapshot.Snapshot{}, wrap("looking up snapshot", err)
		}
	}
	if notReady != nil {
		return nil, snapshot.Snapshot{}, wrap("looking up snapshot "+id, notReady)
	}
	return nil, snapshot.Snapshot{}, refuse(NotFound, "snapshot %q does not exist on node %s", id, rt.cfg.NodeID)
}

// TakeSnapshot copies the volume into its pool's snapshot area as
// snapshot name, or returns the snapshot of that name already there. The
// caller holds the locks of both. A pool without snapshotProvider is
// Precondition, naming the setting.
func (rt *Runtime) TakeSnapshot(ctx context.Context, name string, vol Volume) (snapshot.Snapshot, error) {
	p := vol.pool
	snaps := p.snapshots()
	if snaps == nil {
		return snapshot.Snapshot{}, refuse(Precondition, "storage pool %q on node %s takes no snapshots: set its snapshotProvider (\"reflink\") in --datadir (the operator's Snapshotting feature gate and the pool's snapshotProvider)",
			p.name(), rt.cfg.NodeID)
	}
	snap, created, err := snaps.Create(ctx, name, snapshot.Source{VolumeID: vol.ID, Dir: vol.Path, CapacityBytes: vol.CapacityBytes})
	if errors.Is(err, snapshot.ErrOtherSource) {
		return snapshot.Snapshot{}, refuse(Exists, "%v", err)
	}
	if err != nil {
		return snapshot.Snapshot{}, copyFailed("taking snapshot", err)
	}
	if created {
		rt.log.Info("snapshot created", zap.String("snapshot", snap.ID), zap.String("volume", vol.ID), zap.String("pool", p.name()),
			zap.String("copy", snaps.Mode().String()), zap.Int64("sizeBytes", snap.SizeBytes))
	}
	return snap, nil
}

// DeleteSnapshot removes snapshot id; one that does not exist is NotFound.
// The caller holds its lock.
func (rt *Runtime) DeleteSnapshot(ctx context.Context, id string) error {
	p, snap, err := rt.findSnapshot(ctx, id)
	if err != nil {
		return err
	}
	if err := p.snapshots().Delete(ctx, id); err != nil {
		return wrap("deleting snapshot", err)
	}
	rt.log.Info("snapshot deleted", zap.String("snapshot", id), zap.String("volume", snap.SourceVolumeID), zap.String("pool", p.name()))
	return nil
}

// Snapshots lists every snapshot (of source only, when set) in (pool
// order, id) order.
func (rt *Runtime) Snapshots(ctx context.Context, source string) ([]PoolSnapshot, error) {
	var out []PoolSnapshot
	for _, p := range rt.usable() {
		snaps := p.snapshots()
		if snaps == nil {
			continue
		}
		list, err := snaps.List(ctx)
		if err != nil {
			return nil, wrap("listing snapshots of pool "+p.name(), err)
		}
		for _, s := range list {
			if source != "" && s.SourceVolumeID != source {
				continue
			}
			out = append(out, PoolSnapshot{Pool: p.name(), Snapshot: s})
		}
	}
	return out, nil
}
