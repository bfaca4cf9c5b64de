package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// ListSnapshots pages through every pool's snapshots in (pool order, id)
// order with the same position tokens as ListVolumes: a snapshot taken or
// deleted between two pages neither repeats nor skips the others.
func (d *Driver) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if id := req.GetSnapshotId(); id != "" {
		// One snapshot, or none: an unknown id is an empty list.
		if err := pool.ValidateID(id); err != nil {
			return &csi.ListSnapshotsResponse{}, nil //nolint:nilerr // no snapshot has such an id: the list is empty
		}
		snap, err := d.pools.FindSnapshot(ctx, id)
		if isNotFound(err) {
			return &csi.ListSnapshotsResponse{}, nil
		}
		if err != nil {
			return nil, toStatus("ListSnapshots", err)
		}
		if src := req.GetSourceVolumeId(); src != "" && src != snap.SourceVolumeID {
			return &csi.ListSnapshotsResponse{}, nil
		}
		return &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: csiSnapshot(snap.Snapshot)}}}, nil
	}
	all, err := d.pools.Snapshots(ctx, req.GetSourceVolumeId())
	if err != nil {
		return nil, toStatus("ListSnapshots", err)
	}
	entries, next, err := page(d, all, func(s pools.PoolSnapshot) (string, string) { return s.Pool, s.ID },
		req.GetMaxEntries(), req.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(e.Snapshot)})
	}
	return resp, nil
}
