package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// controllerOnly is what hpp-csi serves with --controller-only: Identity
// and ControllerExpandVolume for csi-resizer, which has no per-node mode
// and so needs one endpoint for the whole cluster. It opens no pool and
// holds no state: the volume lives on one node, and that node's hpp-csi
// checks the pool and changes the volume in NodeExpandVolume. Everything
// else of the Controller service is Unimplemented, and there is no Node
// service, so nothing can provision through this endpoint by mistake.
type controllerOnly struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	d *Driver
}

func (c controllerOnly) GetPluginInfo(ctx context.Context, req *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return c.d.GetPluginInfo(ctx, req)
}

// GetPluginCapabilities: a controller service that expands volumes while
// they are in use. No VOLUME_ACCESSIBILITY_CONSTRAINTS: it provisions
// nothing.
func (controllerOnly) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

// Probe is always ready: there is nothing to open.
func (controllerOnly) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// ControllerGetCapabilities: expansion, and the single-node access modes
// the node plugin serves (csi-resizer asks for SINGLE_NODE_MULTI_WRITER to
// know how to read a ReadWriteOncePod volume's access mode).
func (controllerOnly) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

// ControllerExpandVolume is the bookkeeping half of an expansion: it checks
// the request and answers with the size asked for, leaving the rest to the
// node (NodeExpansionRequired). Kubernetes then records the new size in
// the PV and has kubelet call NodeExpandVolume on the node that holds the
// volume, which refuses a size its pool cannot hold; until it succeeds
// the claim's status keeps the old size. A repeated call gives the same
// answer.
func (c controllerOnly) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	size, err := validateExpand(req)
	if err != nil {
		return nil, err
	}
	c.d.log.Info("expansion passed to the node", zap.String("volume", req.GetVolumeId()), zap.Int64("capacityBytes", size))
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: true}, nil
}
