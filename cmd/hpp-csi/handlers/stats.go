package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/status"
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
	exists, err := d.pools.Exists(req.GetVolumePath())
	if err != nil {
		return nil, internal("checking volume_path", err)
	}
	if !exists {
		return nil, notFound("volume_path %s does not exist on node %s", req.GetVolumePath(), d.cfg.NodeID)
	}
	vol, err := d.pools.Find(ctx, req.GetVolumeId())
	if err != nil {
		return nil, toStatus("NodeGetVolumeStats", err)
	}
	st, err := d.pools.Stats(ctx, vol)
	if err != nil {
		return nil, toStatus("NodeGetVolumeStats", err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Used: st.UsedBytes, Available: st.AvailableBytes, Total: st.TotalBytes},
		{Unit: csi.VolumeUsage_INODES, Used: st.UsedInodes, Available: st.AvailableInodes, Total: st.TotalInodes},
	}}, nil
}
