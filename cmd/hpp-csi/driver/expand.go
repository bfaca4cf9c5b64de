package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"
)

// ControllerExpandVolume grows a volume's recorded size. A hostpath volume
// is a quota-free directory, so nothing on disk changes size: the record
// and the capacity accounting (what reservation-aware capacity keeps for
// it) do, and the PV reports the new size. No node step is needed
// (NodeExpansionRequired is false), which is why the node service does not
// claim EXPAND_VOLUME. A smaller request than the recorded size is
// answered with the recorded size: directories are never shrunk.
func (d *Driver) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := validateVolumeID(id); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, invalidArg("capacity_range: required")
	}
	size, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, invalidArg("capacity_range: required_bytes or limit_bytes must be positive")
	}
	if c := req.GetVolumeCapability(); c != nil && c.GetBlock() != nil {
		return nil, invalidArg("volume_capability: block access is not supported: hostpath volumes are filesystem volumes")
	}
	release, err := d.locks.acquire(id)
	if err != nil {
		return nil, err
	}
	defer release()
	l, err := d.findVolume(ctx, id, "")
	if err != nil {
		return nil, err
	}
	p, vol := l.pool, l.vol
	resp := &csi.ControllerExpandVolumeResponse{CapacityBytes: vol.CapacityBytes, NodeExpansionRequired: false}
	if vol.CapacityBytes >= size && vol.CapacityBytes > 0 {
		return resp, nil
	}
	// The record is written in the pool's own directory (a legacy volume's
	// is hpp-legacy's to write, so expanding one is refused as not found).
	store, err := d.storeOf(p.own)
	if err != nil {
		return nil, toStatus("opening pool", err)
	}
	// The volume's own reservation is already counted in what the pool
	// offers, so only the growth must fit.
	growth := size - vol.CapacityBytes
	if err := d.checkRoom(ctx, p, store, size, growth, fmt.Sprintf("the %d bytes this expansion adds", growth)); err != nil {
		return nil, err
	}
	vol, err = store.Resize(ctx, id, size)
	if err != nil {
		return nil, toStatus("recording the new size", err)
	}
	d.log.Info("volume expanded", zap.String("volume", id), zap.String("pool", p.name()),
		zap.Int64("capacityBytes", size), zap.Int64("previousBytes", resp.CapacityBytes))
	resp.CapacityBytes = vol.CapacityBytes
	return resp, nil
}
