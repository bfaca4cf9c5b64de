package driver

import (
	"context"
	"errors"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/snapshot"
)

// Snapshots are node-local: a snapshot is a copy of a volume directory in
// the snapshot area of the volume's pool, on the volume's node. Each node
// runs its own csi-snapshotter (--node-deployment), which sends only its
// node's volumes here. A request for a volume this node does not hold is
// answered NotFound (the CSI spec's code for a source volume that does not
// exist; FailedPrecondition would tell the CO to retry after fixing state
// that is not wrong), with a message naming the node.

// snapLockKey keeps snapshot ids apart from volume ids in the lock map:
// '/' never appears in an id.
func snapLockKey(id string) string { return "snapshot/" + id }

func (d *Driver) snapStore(p *poolState) *snapshot.Store {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copies.snaps
}

// validateSnapshotID checks an id-shaped field: snapshot ids are volume
// ids in form, as the snapshot's directory is named by it.
func validateSnapshotID(field, id string) error {
	if id == "" {
		return invalidArg("%s: required", field)
	}
	if err := pool.ValidateID(id); err != nil {
		return invalidArg("%s: %v", field, err)
	}
	return nil
}

func (d *Driver) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := validateSnapshotID("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := validateSnapshotID("source_volume_id", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	release, err := d.locks.acquire(snapLockKey(req.GetName()))
	if err != nil {
		return nil, err
	}
	defer release()
	// An existing snapshot of that name answers a retry wherever it is.
	if _, snap, err := d.findSnapshot(ctx, req.GetName()); err == nil {
		if snap.SourceVolumeID != req.GetSourceVolumeId() {
			return nil, alreadyExists("snapshot %q already exists of volume %q, not of %q", snap.ID, snap.SourceVolumeID, req.GetSourceVolumeId())
		}
		return &csi.CreateSnapshotResponse{Snapshot: d.csiSnapshot(snap)}, nil
	} else if !isNotFound(err) {
		return nil, err
	}
	// The source must not be deleted or cloned into while it is copied.
	releaseVol, err := d.locks.acquire(req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	defer releaseVol()
	l, err := d.findVolume(ctx, req.GetSourceVolumeId(), "")
	if isNotFound(err) {
		return nil, notFound("volume %q is not on node %s: snapshots are node-local, taken by the node that holds the volume (run csi-snapshotter per node with --node-deployment)",
			req.GetSourceVolumeId(), d.cfg.NodeID)
	}
	if err != nil {
		return nil, err
	}
	p, vol := l.pool, l.vol
	snaps := d.snapStore(p)
	if snaps == nil {
		return nil, failedPrecondition("storage pool %q on node %s takes no snapshots: set its snapshotProvider (\"reflink\") in --datadir (the operator's Snapshotting feature gate and the pool's snapshotProvider)",
			p.name(), d.cfg.NodeID)
	}
	snap, created, err := snaps.Create(ctx, req.GetName(), snapshot.Source{VolumeID: vol.ID, Dir: vol.Path, CapacityBytes: vol.CapacityBytes})
	if errors.Is(err, snapshot.ErrOtherSource) {
		return nil, alreadyExists("%v", err)
	}
	if err != nil {
		return nil, copyStatus("taking snapshot", err)
	}
	if created {
		d.log.Info("snapshot created", zap.String("snapshot", snap.ID), zap.String("volume", vol.ID), zap.String("pool", p.name()),
			zap.String("copy", snaps.Mode().String()), zap.Int64("sizeBytes", snap.SizeBytes))
	}
	return &csi.CreateSnapshotResponse{Snapshot: d.csiSnapshot(snap)}, nil
}

// copyStatus maps a failed copy: a full pool is ResourceExhausted (the CO
// may retry once space is freed), the rest as usual.
func copyStatus(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return errCode(codes.ResourceExhausted, "%s: %v", op, err)
	}
	return toStatus(op, err)
}

func (d *Driver) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, invalidArg("snapshot_id: required")
	}
	if pool.ValidateID(id) != nil {
		// No snapshot can have such an id: it is gone already.
		return &csi.DeleteSnapshotResponse{}, nil
	}
	release, err := d.locks.acquire(snapLockKey(id))
	if err != nil {
		return nil, err
	}
	defer release()
	p, snap, err := d.findSnapshot(ctx, id)
	if isNotFound(err) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := d.snapStore(p).Delete(ctx, id); err != nil {
		return nil, toStatus("deleting snapshot", err)
	}
	d.log.Info("snapshot deleted", zap.String("snapshot", id), zap.String("volume", snap.SourceVolumeID), zap.String("pool", p.name()))
	return &csi.DeleteSnapshotResponse{}, nil
}

func (d *Driver) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := validateSnapshotID("snapshot_id", req.GetSnapshotId()); err != nil {
		if req.GetSnapshotId() == "" {
			return nil, err
		}
		return nil, notFound("snapshot %q does not exist on node %s", req.GetSnapshotId(), d.cfg.NodeID)
	}
	_, snap, err := d.findSnapshot(ctx, req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	return &csi.GetSnapshotResponse{Snapshot: d.csiSnapshot(snap)}, nil
}

// findSnapshot looks for id in every pool's snapshot area. Like
// findVolume, a pool that cannot be read makes the answer Unavailable
// rather than NotFound, which the CO would take as deleted.
func (d *Driver) findSnapshot(ctx context.Context, id string) (*poolState, snapshot.Snapshot, error) {
	var notReady error
	for _, p := range d.pools {
		if !snapshotsOn(p.cfg) {
			continue
		}
		if _, err := d.storeOf(p.own); err != nil {
			notReady = err
			continue
		}
		snaps := d.snapStore(p)
		if snaps == nil {
			continue
		}
		snap, err := snaps.Get(ctx, id)
		if err == nil {
			return p, snap, nil
		}
		if !errors.Is(err, snapshot.ErrNotFound) {
			return nil, snapshot.Snapshot{}, toStatus("looking up snapshot", err)
		}
	}
	if notReady != nil {
		return nil, snapshot.Snapshot{}, toStatus("looking up snapshot "+id, notReady)
	}
	return nil, snapshot.Snapshot{}, notFound("snapshot %q does not exist on node %s", id, d.cfg.NodeID)
}

// csiSnapshot describes a snapshot: it exists only once its copy is
// complete and durable, so it is always ready to use.
func (d *Driver) csiSnapshot(s snapshot.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.SourceVolumeID,
		SizeBytes:      s.SizeBytes,
		CreationTime:   timestamppb.New(s.Created),
		ReadyToUse:     true,
	}
}
