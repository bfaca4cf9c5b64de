package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
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
	release, err := d.pools.LockSnapshot(req.GetName())
	if err != nil {
		return nil, toStatus("CreateSnapshot", err)
	}
	defer release()
	// An existing snapshot of that name answers a retry wherever it is.
	if snap, err := d.pools.FindSnapshot(ctx, req.GetName()); err == nil {
		if snap.SourceVolumeID != req.GetSourceVolumeId() {
			return nil, alreadyExists("snapshot %q already exists of volume %q, not of %q", snap.ID, snap.SourceVolumeID, req.GetSourceVolumeId())
		}
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap.Snapshot)}, nil
	} else if !isNotFound(err) {
		return nil, toStatus("CreateSnapshot", err)
	}
	// The source must not be deleted or cloned into while it is copied.
	releaseVol, err := d.pools.Lock(req.GetSourceVolumeId())
	if err != nil {
		return nil, toStatus("CreateSnapshot", err)
	}
	defer releaseVol()
	vol, err := d.pools.Find(ctx, req.GetSourceVolumeId())
	if isNotFound(err) {
		return nil, notFound("volume %q is not on node %s: snapshots are node-local, taken by the node that holds the volume (run csi-snapshotter per node with --node-deployment)",
			req.GetSourceVolumeId(), d.cfg.NodeID)
	}
	if err != nil {
		return nil, toStatus("CreateSnapshot", err)
	}
	snap, err := d.pools.TakeSnapshot(ctx, req.GetName(), vol)
	if err != nil {
		return nil, toStatus("CreateSnapshot", err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
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
	release, err := d.pools.LockSnapshot(id)
	if err != nil {
		return nil, toStatus("DeleteSnapshot", err)
	}
	defer release()
	if err := d.pools.DeleteSnapshot(ctx, id); err != nil && !isNotFound(err) {
		return nil, toStatus("DeleteSnapshot", err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (d *Driver) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := validateSnapshotID("snapshot_id", req.GetSnapshotId()); err != nil {
		if req.GetSnapshotId() == "" {
			return nil, err
		}
		return nil, notFound("snapshot %q does not exist on node %s", req.GetSnapshotId(), d.cfg.NodeID)
	}
	snap, err := d.pools.FindSnapshot(ctx, req.GetSnapshotId())
	if err != nil {
		return nil, toStatus("GetSnapshot", err)
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(snap.Snapshot)}, nil
}

// csiSnapshot describes a snapshot: it exists only once its copy is
// complete and durable, so it is always ready to use.
func csiSnapshot(s snapshot.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.SourceVolumeID,
		SizeBytes:      s.SizeBytes,
		CreationTime:   timestamppb.New(s.Created),
		ReadyToUse:     true,
	}
}
