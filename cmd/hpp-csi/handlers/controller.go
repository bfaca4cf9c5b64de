package handlers

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

func (d *Driver) ControllerGetCapabilities(_ context.Context, _ *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	types := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	}
	if d.pools.AnySnapshots() {
		types = append(types, csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
			csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS, csi.ControllerServiceCapability_RPC_GET_SNAPSHOT)
	}
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range types {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

func (d *Driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	cr, err := validateCreateRequest(d.cfg.Pools, req)
	if err != nil {
		return nil, err
	}
	// A shared pool's volumes are on every node: any node may make them,
	// whatever topology the CO asks for, and Immediate binding is fine.
	if !cr.pool.Shared {
		if err := d.wantsThisNode(req.GetAccessibilityRequirements()); err != nil {
			return nil, err
		}
		if err := d.refuseImmediate(ctx, req.GetParameters()); err != nil {
			return nil, err
		}
	}
	release, err := d.pools.Lock(cr.name)
	if err != nil {
		return nil, toStatus("CreateVolume", err)
	}
	defer release()
	vol, err := d.pools.Create(ctx, pools.Creation{
		Pool: cr.pool.Name, ID: cr.name, What: "volume", Source: cr.source, Claim: cr.params.claim,
		Spec: dirvol.Spec{
			Ownership:     cr.params.ownership,
			CapacityBytes: cr.size,
			Kind:          dirvol.KindPersistent,
			Attributes:    cr.attributes,
		},
		// A repeated request is the same volume when the recorded size fits
		// its range. A volume made without a recorded size (KubeVirt
		// driver, by hand) has no quota to contradict any range.
		Accept: func(existing dirvol.Volume) error {
			r, size := req.GetCapacityRange(), existing.CapacityBytes
			if size != 0 && (r.GetRequiredBytes() > size || r.GetLimitBytes() != 0 && size > r.GetLimitBytes()) {
				return alreadyExists("volume %q already exists with capacity %d bytes, incompatible with the requested range [%d, %d]",
					cr.name, existing.CapacityBytes, req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes())
			}
			return nil
		},
	})
	if err != nil {
		return nil, toStatus("CreateVolume", err)
	}
	resp := d.createResponse(vol)
	resp.Volume.ContentSource = req.GetVolumeContentSource()
	return resp, nil
}

// createResponse describes a volume. A shared pool's volume carries no
// topology: per the CSI spec it is then accessible from every node.
func (d *Driver) createResponse(vol pools.Volume) *csi.CreateVolumeResponse {
	v := &csi.Volume{
		VolumeId:      vol.ID,
		CapacityBytes: vol.CapacityBytes,
		VolumeContext: map[string]string{contract.ParamStoragePool: vol.Pool()},
	}
	d.volumeContextIdentity(vol, v.VolumeContext)
	if !vol.Shared() {
		v.AccessibleTopology = []*csi.Topology{d.topology()}
	}
	return &csi.CreateVolumeResponse{Volume: v}
}

// volumeContextIdentity adds the pool's identity to a new volume's context.
func (d *Driver) volumeContextIdentity(vol pools.Volume, volCtx map[string]string) {
	if id, err := vol.PoolIdentity(); err == nil && id != "" {
		volCtx[contract.VolumeContextPoolID] = id
	} else if err != nil {
		d.log.Warn("storage pool has no identity marker; the volume is created without one", zap.String("pool", vol.Pool()), zap.Error(err))
	}
}

func (d *Driver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := validateVolumeID(id); err != nil {
		return nil, err
	}
	release, err := d.pools.Lock(id)
	if err != nil {
		return nil, toStatus("DeleteVolume", err)
	}
	defer release()
	// A copy from another node into the volume stops first (leaving
	// nothing), or has published by then and is deleted below.
	if err := d.pools.StopCopy(ctx, id); err != nil {
		return nil, toStatus("DeleteVolume", err)
	}
	vol, err := d.pools.Find(ctx, id)
	if isNotFound(err) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, toStatus("DeleteVolume", err)
	}
	if err := d.pools.Delete(ctx, vol, "volume"); err != nil {
		return nil, toStatus("DeleteVolume", err)
	}
	d.log.Info("volume deleted", zap.String("volume", id), zap.String("pool", vol.Pool()), zap.String("path", vol.Path))
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, invalidArg("volume_capabilities: at least one capability is required")
	}
	if _, err := parseParams(req.GetParameters()); err != nil {
		return nil, err
	}
	_, multiNode, err := d.findForContext(ctx, req.GetVolumeId(), req.GetVolumeContext())
	if err != nil {
		return nil, toStatus("ValidateVolumeCapabilities", err)
	}
	for i, c := range req.GetVolumeCapabilities() {
		if why := checkCapability(c, multiNode); why != "" {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: fmt.Sprintf("volume_capabilities[%d]: %s", i, why)}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (d *Driver) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	vol, err := d.pools.Find(ctx, req.GetVolumeId())
	if err != nil {
		return nil, toStatus("ControllerGetVolume", err)
	}
	v := d.createResponse(vol).GetVolume()
	if vol.InLegacy() {
		v.VolumeContext[contract.VolumeContextLayout] = contract.LayoutLegacy
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: v,
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{},
	}, nil
}

// findForContext finds the volume a publish (or capability check) names,
// reading the layout from its volume context: the PV says where the
// directory is, so nothing is searched for. It also says whether
// multi-node access modes are fine: for a shared pool, and for a legacy
// volume, whose PV hpp-migrate carried over from the legacy provisioner
// (which took ReadWriteMany to mean many pods on this one node) and pinned
// to one node anyway.
func (d *Driver) findForContext(ctx context.Context, id string, volCtx map[string]string) (pools.Volume, bool, error) {
	switch layout := volCtx[contract.VolumeContextLayout]; layout {
	case "":
		// Without the layout the PV names a volume hpp-csi made (or the
		// KubeVirt driver did): a legacy directory of that name is not it.
		vol, err := d.pools.FindOwn(ctx, id, volCtx[contract.ParamStoragePool])
		if err != nil {
			return pools.Volume{}, false, err
		}
		return vol, vol.Shared(), nil
	case contract.LayoutLegacy:
		poolName := volCtx[contract.ParamStoragePool]
		if poolName == "" {
			return pools.Volume{}, false, invalidArg("volume_context: %s is required with %s=%s (the pool whose legacyPath holds the directory)",
				contract.ParamStoragePool, contract.VolumeContextLayout, contract.LayoutLegacy)
		}
		vol, err := d.pools.FindLegacy(ctx, poolName, id)
		return vol, true, err
	default:
		return pools.Volume{}, false, invalidArg("volume_context: %s %q is not a layout hpp-csi knows; the only one is %q (absent for volumes hpp-csi made)",
			contract.VolumeContextLayout, layout, contract.LayoutLegacy)
	}
}
