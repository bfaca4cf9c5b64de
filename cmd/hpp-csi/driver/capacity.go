package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// poolCapacity is what a pool can offer to new volumes right now.
type poolCapacity struct {
	stats capacity.Stats
	// offered is free space minus headroom and, when reservation-aware,
	// minus what live volumes requested but have not written yet.
	offered  int64
	reserved int64
}

func (d *Driver) poolCapacity(ctx context.Context, p *poolState, store *dirvol.Store) (poolCapacity, error) {
	st, err := d.deps.FS.Statfs(p.cfg.Path)
	if err != nil {
		return poolCapacity{}, fmt.Errorf("statfs of pool %q at %s: %w", p.name(), p.cfg.Path, err)
	}
	c := poolCapacity{stats: st, offered: capacity.Offered(st, p.headroom)}
	if p.cfg.EnforceSize {
		// Every enforced volume may still write up to its limit: that is
		// taken, whatever the flag says.
		committed, err := p.committed()
		if err != nil {
			return poolCapacity{}, fmt.Errorf("project quota usage of pool %q: %w", p.name(), err)
		}
		c.reserved = committed + d.legacyReserved(p)
		c.offered = max(0, c.offered-c.reserved)
		return c, nil
	}
	if d.cfg.ReservationAware && store != nil {
		// The store keeps the sum up to date (creates, deletes and the
		// usage measured by NodeGetVolumeStats), so this costs the same
		// with 10,000 volumes as with none.
		c.reserved = store.Reserved() + d.legacyReserved(p)
		c.offered = max(0, c.offered-c.reserved)
	}
	return c, nil
}

// checkFits refuses a volume the pool cannot hold: OutOfRange when it could
// never fit (larger than the filesystem), ResourceExhausted when it does not
// fit now.
func (d *Driver) checkFits(ctx context.Context, p *poolState, store *dirvol.Store, size int64) error {
	if size == 0 {
		return nil
	}
	return d.checkRoom(ctx, p, store, size, size, fmt.Sprintf("the requested %d bytes", size))
}

// checkRoom refuses a volume of size bytes whose extra bytes (all of them
// for a new volume, the growth for an expansion) the pool cannot offer;
// need describes them in the message.
func (d *Driver) checkRoom(ctx context.Context, p *poolState, store *dirvol.Store, size, extra int64, need string) error {
	c, err := d.poolCapacity(ctx, p, store)
	if err != nil {
		return toStatus("checking pool capacity", err)
	}
	if size > c.stats.TotalBytes {
		return errCode(codes.OutOfRange, "requested %d bytes exceeds the total size %d bytes of storage pool %q on node %s",
			size, c.stats.TotalBytes, p.name(), d.cfg.NodeID)
	}
	if extra > c.offered {
		return errCode(codes.ResourceExhausted, "storage pool %q on node %s can offer %d bytes now (free %d, headroom %d, reserved by volumes %d), less than %s",
			p.name(), d.cfg.NodeID, c.offered, c.stats.AvailableBytes, p.headroom.Reserved(c.stats.TotalBytes), c.reserved, need)
	}
	return nil
}

func (d *Driver) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if seg := req.GetAccessibleTopology().GetSegments(); seg != nil {
		if node, ok := seg[contract.TopologyKey]; !ok || node != d.cfg.NodeID {
			// Another node's segment: this node offers nothing there.
			return &csi.GetCapacityResponse{}, nil
		}
	}
	params, err := parseParams(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if params.storagePool != "" {
		if _, ok := d.poolNamed(params.storagePool); !ok {
			// Pools differ between nodes; a class for a pool this node
			// lacks simply has no capacity here.
			return &csi.GetCapacityResponse{}, nil
		}
	}
	p, err := d.selectPool(params.storagePool)
	if err != nil {
		// No pool can be chosen for such a class (several pools, none
		// named legacy), so CreateVolume would refuse it: it has no
		// capacity here. An error would only make the capacity
		// controller retry forever.
		return &csi.GetCapacityResponse{}, nil //nolint:nilerr // zero capacity is the answer
	}
	for _, c := range req.GetVolumeCapabilities() {
		if checkCapability(c, p.shared()) != "" {
			// Nothing of this kind can be provisioned here.
			return &csi.GetCapacityResponse{}, nil
		}
	}
	store, err := d.storeOf(p.own)
	if err != nil {
		// A pool that is not mounted offers nothing; that is an answer,
		// not an error the capacity controller should retry.
		return &csi.GetCapacityResponse{}, nil //nolint:nilerr // zero capacity is the answer
	}
	c, err := d.poolCapacity(ctx, p, store)
	if err != nil {
		return nil, toStatus("GetCapacity", err)
	}
	return &csi.GetCapacityResponse{
		AvailableCapacity: c.offered,
		// The largest volume that fits now is exactly what is offered; the
		// filesystem's total would let the scheduler overcommit.
		MaximumVolumeSize: wrapperspb.Int64(c.offered),
	}, nil
}

// legacyReserved is what the pool's legacy volumes requested but have not
// written yet, when they share the pool's filesystem (elsewhere they take
// nothing from the pool's free space). Only volumes hpp-legacy recorded
// have a known request, and the guest store's sum is what the directory
// held when hpp-csi opened it, less what hpp-csi deleted since: volumes
// hpp-legacy makes or deletes later are not seen until a restart (it
// checks its own capacity when it creates; an entry it deleted only makes
// this offer less, never more).
func (d *Driver) legacyReserved(p *poolState) int64 {
	if p.legacy == nil {
		return 0
	}
	store, err := d.storeOf(p.legacy)
	if err != nil {
		return 0
	}
	if own, err := d.deps.FS.DeviceOf(p.cfg.Path); err != nil || own != p.legacy.openedDevice() {
		return 0
	}
	return store.Reserved()
}
