package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, invalidArg("volume_path: required")
	}
	if err := validatePath("volume_path", req.GetVolumePath()); err != nil {
		// The spec's answer for a path where no volume is: NotFound.
		return nil, notFound("volume_path %q is not where volume %q is published: %v", req.GetVolumePath(), req.GetVolumeId(), status.Convert(err).Message())
	}
	exists, err := d.deps.FS.Exists(req.GetVolumePath())
	if err != nil {
		return nil, internal("checking volume_path", err)
	}
	if !exists {
		return nil, notFound("volume_path %s does not exist on node %s", req.GetVolumePath(), d.cfg.NodeID)
	}
	l, err := d.findVolume(ctx, req.GetVolumeId(), "")
	if err != nil {
		return nil, err
	}
	if resp, ok, err := d.quotaStats(l); ok || err != nil {
		return resp, err
	}
	used, err := d.stats.get(ctx, l.vol.Path, func(u dirvol.Usage) { l.store.NoteUsage(l.vol.ID, u.Bytes) })
	if err != nil {
		return nil, toStatus("measuring volume usage", err)
	}
	st, err := d.deps.FS.Statfs(l.root.path)
	if err != nil {
		return nil, internal(fmt.Sprintf("statfs of pool %q", l.pool.name()), err)
	}
	available := capacity.Offered(st, l.pool.headroom)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Used: used.Bytes, Available: available, Total: used.Bytes + available},
		{Unit: csi.VolumeUsage_INODES, Used: used.Inodes, Available: st.FreeInodes, Total: used.Inodes + st.FreeInodes},
	}}, nil
}

// quotaStats answers NodeGetVolumeStats for an enforced volume from the
// kernel's quota accounting, without a walk: the limit is the total, and
// what is available is what the limit leaves, bounded by the filesystem's
// free space. ok is false for a volume without a project quota (its stats
// come from the walk, and its total is its usage plus what the pool offers:
// it has no size limit, as its health says).
func (d *Driver) quotaStats(l located) (*csi.NodeGetVolumeStatsResponse, bool, error) {
	q := l.pool.ledger()
	if q == nil || l.inLegacy() {
		return nil, false, nil
	}
	_, limit, held := q.Held(l.vol.ID)
	if !held {
		return nil, false, nil
	}
	usage, _, err := q.Usage(l.vol.ID)
	if err != nil {
		return nil, true, toStatus("reading the volume's project quota", err)
	}
	st, err := d.deps.FS.Statfs(l.root.path)
	if err != nil {
		return nil, true, internal(fmt.Sprintf("statfs of pool %q", l.pool.name()), err)
	}
	used := usage.UsedBytes
	available := min(max(0, limit-used), st.AvailableBytes)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Used: used, Available: available, Total: limit},
		{Unit: csi.VolumeUsage_INODES, Used: usage.UsedInodes, Available: st.FreeInodes, Total: usage.UsedInodes + st.FreeInodes},
	}}, true, nil
}
