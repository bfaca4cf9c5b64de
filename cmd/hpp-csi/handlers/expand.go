package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
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
	vol, release, err := d.findLocked(ctx, "ControllerExpandVolume", id)
	if err != nil {
		return nil, err
	}
	defer release()
	recorded, err := d.pools.RecordSize(ctx, vol, size)
	if err != nil {
		return nil, toStatus("ControllerExpandVolume", err)
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: recorded, NodeExpansionRequired: vol.Enforced()}, nil
}

// findLocked takes volume id's lock and finds the volume, as both
// expansion calls do before they change its size; the caller releases the
// lock. op names the call in the gRPC error.
func (d *Driver) findLocked(ctx context.Context, op, id string) (pools.Volume, func(), error) {
	release, err := d.pools.Lock(id)
	if err != nil {
		return pools.Volume{}, nil, toStatus(op, err)
	}
	vol, err := d.pools.Find(ctx, id)
	if err != nil {
		release()
		return pools.Volume{}, nil, toStatus(op, err)
	}
	return vol, release, nil
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
	vol, release, err := d.findLocked(ctx, "NodeExpandVolume", id)
	if err != nil {
		return nil, err
	}
	defer release()
	if size == 0 {
		size = max(vol.CapacityBytes, d.pools.EnforcedSize(vol))
		if size == 0 {
			// No size known and none asked for: nothing to enforce.
			return &csi.NodeExpandVolumeResponse{}, nil
		}
	}
	if vol.InLegacy() {
		// hpp-legacy's directories are never enforced: nothing to raise.
		return &csi.NodeExpandVolumeResponse{CapacityBytes: max(size, vol.CapacityBytes)}, nil
	}
	if limit := d.pools.EnforcedSize(vol); limit > size || vol.CapacityBytes > size {
		return nil, errCode(codes.OutOfRange, "volume %q is %d bytes; shrinking it to %d bytes is refused (volumes only grow)",
			id, max(limit, vol.CapacityBytes), size)
	}
	recorded, err := d.pools.RecordSize(ctx, vol, size)
	if err != nil {
		return nil, toStatus("NodeExpandVolume", err)
	}
	if err := d.pools.RaiseLimit(ctx, vol, recorded); err != nil {
		return nil, toStatus("NodeExpandVolume", err)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: recorded}, nil
}
