package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
)

// validateExpand checks a ControllerExpandVolume request and returns the
// size it asks for.
func validateExpand(req *csi.ControllerExpandVolumeRequest) (int64, error) {
	return validateExpandSize(req.GetVolumeId(), req.GetCapacityRange(), req.GetVolumeCapability())
}

// validateExpandSize checks what both expansion calls carry and returns
// the requested size.
func validateExpandSize(id string, r *csi.CapacityRange, c *csi.VolumeCapability) (int64, error) {
	if err := validateVolumeID(id); err != nil {
		return 0, err
	}
	if r == nil {
		return 0, invalidArg("capacity_range: required")
	}
	size, err := requestedBytes(r)
	if err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, invalidArg("capacity_range: required_bytes or limit_bytes must be positive")
	}
	if c != nil && c.GetBlock() != nil {
		return 0, invalidArg("volume_capability: block access is not supported: hostpath volumes are filesystem volumes")
	}
	return size, nil
}

// ControllerExpandVolume grows a volume's recorded size. Without enforced
// sizes a hostpath volume is a quota-free directory, so nothing on disk
// changes size: the record and the capacity accounting do, and no node
// step is needed. In a pool with enforceSize the new limit is set on the
// node (NodeExpandVolume), so NodeExpansionRequired is true there. A
// smaller request than the recorded size is answered with the recorded
// size: directories are never shrunk.
func (d *Driver) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	size, err := validateExpand(req)
	if err != nil {
		return nil, err
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
	enforcing := l.pool.cfg.EnforceSize && !l.inLegacy()
	recorded, err := d.recordSize(ctx, l, size)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: recorded, NodeExpansionRequired: enforcing}, nil
}

// recordSize records a larger size for the volume after checking that the
// pool can offer the growth, and returns the recorded size (unchanged for
// a smaller or equal request).
func (d *Driver) recordSize(ctx context.Context, l located, size int64) (int64, error) {
	p, vol := l.pool, l.vol
	// The volume's own size is already counted in what the pool offers
	// (reserved, or its full limit when enforced), so only the growth
	// must fit. An enforced volume grows from its limit: a size recorded
	// by an earlier call whose limit is not raised yet is not counted.
	base := vol.CapacityBytes
	if limit := d.enforcedSize(l); limit > 0 {
		base = limit
	}
	if size <= base && size <= vol.CapacityBytes {
		return vol.CapacityBytes, nil
	}
	// The record is written in the pool's own directory (a legacy volume's
	// is hpp-legacy's to write, so expanding one is refused as not found).
	store, err := d.storeOf(p.own)
	if err != nil {
		return 0, toStatus("opening pool", err)
	}
	if growth := size - base; growth > 0 {
		if err := d.checkRoom(ctx, p, store, size, growth, fmt.Sprintf("the %d bytes this expansion adds", growth)); err != nil {
			return 0, err
		}
	}
	if vol.CapacityBytes >= size {
		return vol.CapacityBytes, nil
	}
	vol, err = store.Resize(ctx, vol.ID, size)
	if err != nil {
		return 0, toStatus("recording the new size", err)
	}
	d.step("expand.recorded")
	d.log.Info("volume size recorded", zap.String("volume", vol.ID), zap.String("pool", p.name()),
		zap.Int64("capacityBytes", size), zap.Int64("previousBytes", l.vol.CapacityBytes))
	return vol.CapacityBytes, nil
}

// enforcedSize is the limit the volume's project quota has now; 0 when it
// has none.
func (d *Driver) enforcedSize(l located) int64 {
	q := l.pool.ledger()
	if q == nil || l.inLegacy() {
		return 0
	}
	_, limit, _ := q.Held(l.vol.ID)
	return limit
}

// validateNodeExpand returns the requested size; 0 when the request has
// no capacity_range (optional here: the recorded size is meant).
func validateNodeExpand(req *csi.NodeExpandVolumeRequest) (int64, error) {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return 0, err
	}
	if req.GetVolumePath() == "" {
		// Only required: the volume is found by its id, and the path is
		// never touched (a limit is raised on the volume's directory).
		return 0, invalidArg("volume_path: required")
	}
	if req.GetCapacityRange() == nil {
		if c := req.GetVolumeCapability(); c != nil && c.GetBlock() != nil {
			return 0, invalidArg("volume_capability: block access is not supported: hostpath volumes are filesystem volumes")
		}
		return 0, nil
	}
	return validateExpandSize(req.GetVolumeId(), req.GetCapacityRange(), req.GetVolumeCapability())
}

// NodeExpandVolume raises an enforced volume's limit, while it is in use
// (a project quota changes under open files), after checking that the
// pool can hold the growth. It records the size too, so that a controller
// that could not reach the pool (csi-resizer's controller-only endpoint)
// needs to do nothing on disk. Shrinking is refused. A volume without a
// project quota in an enforcing pool (made by the replaced driver) gets one
// now; outside enforcing pools only the record changes.
func (d *Driver) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	size, err := validateNodeExpand(req)
	if err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	release, err := d.locks.acquire(id)
	if err != nil {
		return nil, err
	}
	defer release()
	l, err := d.findVolume(ctx, id, "")
	if err != nil {
		return nil, err
	}
	if size == 0 {
		size = max(l.vol.CapacityBytes, d.enforcedSize(l))
		if size == 0 {
			// No size known and none asked for: nothing to enforce.
			return &csi.NodeExpandVolumeResponse{}, nil
		}
	}
	if l.inLegacy() {
		// hpp-legacy's directories are never enforced: nothing to raise.
		return &csi.NodeExpandVolumeResponse{CapacityBytes: max(size, l.vol.CapacityBytes)}, nil
	}
	if limit := d.enforcedSize(l); limit > size || l.vol.CapacityBytes > size {
		return nil, errCode(codes.OutOfRange, "volume %q is %d bytes; shrinking it to %d bytes is refused (volumes only grow)",
			id, max(limit, l.vol.CapacityBytes), size)
	}
	recorded, err := d.recordSize(ctx, l, size)
	if err != nil {
		return nil, err
	}
	if err := d.raiseLimit(ctx, l, recorded); err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: recorded}, nil
}

// raiseLimit sets an enforced volume's limit to size, adopting a volume
// that has no project quota yet.
func (d *Driver) raiseLimit(ctx context.Context, l located, size int64) error {
	q := l.pool.ledger()
	if q == nil {
		return nil
	}
	before := d.enforcedSize(l)
	if _, _, held := q.Held(l.vol.ID); held {
		if before == size {
			return nil
		}
		if err := q.Grow(l.vol.ID, size); err != nil {
			return quotaStatus("raising the volume's project quota", err)
		}
	} else if _, err := q.Adopt(ctx, l.vol.Path, l.vol.ID, size); err != nil {
		return quotaStatus("giving the volume a project quota", err)
	}
	d.log.Info("volume limit raised", zap.String("volume", l.vol.ID), zap.String("pool", l.pool.name()),
		zap.Int64("limitBytes", size), zap.Int64("previousBytes", before))
	return nil
}
