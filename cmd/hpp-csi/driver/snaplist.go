package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/snapshot"
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
		_, snap, err := d.findSnapshot(ctx, id)
		if isNotFound(err) {
			return &csi.ListSnapshotsResponse{}, nil
		}
		if err != nil {
			return nil, err
		}
		if src := req.GetSourceVolumeId(); src != "" && src != snap.SourceVolumeID {
			return &csi.ListSnapshotsResponse{}, nil
		}
		return &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: d.csiSnapshot(snap)}}}, nil
	}
	all, byKey, err := d.allSnapshots(ctx, req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	entries, next, err := d.page(all, req.GetMaxEntries(), req.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: d.csiSnapshot(byKey[e.pool.name()+"\x00"+e.vol.ID])})
	}
	return resp, nil
}

// allSnapshots lists every snapshot (of source only, when set) as page
// entries, with the snapshots by pool and id.
func (d *Driver) allSnapshots(ctx context.Context, source string) ([]listed, map[string]snapshot.Snapshot, error) {
	var out []listed
	byKey := map[string]snapshot.Snapshot{}
	for _, p := range d.pools {
		if _, err := d.storeOf(p.own); err != nil {
			continue
		}
		snaps := d.snapStore(p)
		if snaps == nil {
			continue
		}
		list, err := snaps.List(ctx)
		if err != nil {
			return nil, nil, toStatus("listing snapshots of pool "+p.name(), err)
		}
		for _, s := range list {
			if source != "" && s.SourceVolumeID != source {
				continue
			}
			out = append(out, listed{pool: p, vol: dirvol.Volume{ID: s.ID}})
			byKey[p.name()+"\x00"+s.ID] = s
		}
	}
	return out, byKey, nil
}
