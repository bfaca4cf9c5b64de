package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

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
		if _, ok := d.cfg.Pools.Get(params.storagePool); !ok {
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
		if checkCapability(c, p.Shared) != "" {
			// Nothing of this kind can be provisioned here.
			return &csi.GetCapacityResponse{}, nil
		}
	}
	offered, err := d.pools.Offered(ctx, p.Name)
	if err != nil {
		return nil, toStatus("GetCapacity", err)
	}
	return &csi.GetCapacityResponse{
		AvailableCapacity: offered,
		// The largest volume that fits now is exactly what is offered; the
		// filesystem's total would let the scheduler overcommit.
		MaximumVolumeSize: wrapperspb.Int64(offered),
	}, nil
}
