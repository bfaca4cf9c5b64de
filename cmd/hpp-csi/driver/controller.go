package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	types := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	}
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range types {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

// requestedBytes is the capacity a volume records and reports: the request,
// never the pool's size (reporting the disk lets the scheduler overcommit).
func requestedBytes(r *csi.CapacityRange) (int64, error) {
	req, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || limit < 0 {
		return 0, invalidArg("capacity_range: required_bytes %d and limit_bytes %d must not be negative", req, limit)
	}
	if limit > 0 && req > limit {
		return 0, invalidArg("capacity_range: required_bytes %d exceeds limit_bytes %d", req, limit)
	}
	if req > 0 {
		return req, nil
	}
	return limit, nil
}

// compatible reports whether an existing volume satisfies a repeated request.
func compatible(existing int64, r *csi.CapacityRange) bool {
	if existing == 0 {
		// Made without a recorded size (KubeVirt driver, by hand): there
		// is no quota to contradict the request.
		return true
	}
	if r.GetRequiredBytes() > existing {
		return false
	}
	return r.GetLimitBytes() == 0 || existing <= r.GetLimitBytes()
}

func (d *Driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, invalidArg("name: required")
	}
	if err := pool.ValidateID(name); err != nil {
		return nil, invalidArg("name: %v", err)
	}
	if err := validateCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, invalidArg("volume_content_source: cloning and restoring snapshots are not supported by hostpath volumes")
	}
	size, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	params, err := parseParams(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if err := d.wantsThisNode(req.GetAccessibilityRequirements()); err != nil {
		return nil, err
	}
	if err := d.refuseImmediate(ctx, req.GetParameters()); err != nil {
		return nil, err
	}
	p, err := d.selectPool(params.storagePool)
	if err != nil {
		return nil, err
	}
	release, err := d.locks.acquire(name)
	if err != nil {
		return nil, err
	}
	defer release()

	store, err := d.storeOf(p)
	if err != nil {
		return nil, toStatus("opening pool", err)
	}
	if err := d.refuseSameNameElsewhere(ctx, name, p); err != nil {
		return nil, err
	}
	if existing, err := store.Get(ctx, name); err == nil {
		if !compatible(existing.CapacityBytes, req.GetCapacityRange()) {
			return nil, alreadyExists("volume %q already exists with capacity %d bytes, incompatible with the requested range [%d, %d]",
				name, existing.CapacityBytes, req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes())
		}
		return d.createResponse(p, existing), nil
	}
	if err := d.checkFits(ctx, p, store, size); err != nil {
		return nil, err
	}
	vol, created, err := store.Create(ctx, name, dirvol.Spec{
		Ownership:     params.ownership,
		CapacityBytes: size,
		Kind:          dirvol.KindPersistent,
		Attributes:    creationAttributes(req.GetParameters()),
	})
	if err != nil {
		return nil, toStatus("creating volume directory", err)
	}
	if err := d.deps.Labeler.Relabel(ctx, vol.Path); err != nil {
		// An unlabelled volume would fail in the pod on an SELinux host;
		// removing it lets the CO's retry start clean.
		if derr := store.Delete(ctx, name); derr != nil {
			d.log.Error("removing unlabelled volume failed", zap.String("volume", name), zap.Error(derr))
		}
		return nil, toStatus("labelling volume for SELinux", err)
	}
	if created {
		d.log.Info("volume created", zap.String("volume", name), zap.String("pool", p.name()),
			zap.String("path", vol.Path), zap.Int64("capacityBytes", size))
	}
	return d.createResponse(p, vol), nil
}

// creationAttributes keeps who asked for the volume (csi-provisioner's
// --extra-create-metadata) in its metadata, for an operator reading the pool.
func creationAttributes(params map[string]string) map[string]string {
	attrs := map[string]string{}
	for _, k := range []string{"csi.storage.k8s.io/pvc/name", "csi.storage.k8s.io/pvc/namespace", "csi.storage.k8s.io/pv/name"} {
		if v, ok := params[k]; ok {
			attrs[k] = v
		}
	}
	return attrs
}

// refuseSameNameElsewhere keeps a name unique across the node's pools: the
// same name with another storagePool is a different volume, not a retry.
func (d *Driver) refuseSameNameElsewhere(ctx context.Context, name string, want *poolState) error {
	for _, p := range d.pools {
		if p == want {
			continue
		}
		store, err := d.storeOf(p)
		if err != nil {
			continue
		}
		if _, err := store.Get(ctx, name); err == nil {
			return alreadyExists("volume %q already exists in storage pool %q, not in the requested pool %q", name, p.name(), want.name())
		}
	}
	return nil
}

func (d *Driver) createResponse(p *poolState, vol dirvol.Volume) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           vol.ID,
		CapacityBytes:      vol.CapacityBytes,
		VolumeContext:      map[string]string{VolumeContextPool: p.name()},
		AccessibleTopology: []*csi.Topology{d.topology()},
	}}
}

func (d *Driver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := validateVolumeID(id); err != nil {
		return nil, err
	}
	release, err := d.locks.acquire(id)
	if err != nil {
		return nil, err
	}
	defer release()
	p, vol, err := d.findVolume(ctx, id, "")
	if isNotFound(err) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	store, err := d.storeOf(p)
	if err != nil {
		return nil, toStatus("opening pool", err)
	}
	if err := store.Delete(ctx, id); err != nil {
		return nil, toStatus("deleting volume directory", err)
	}
	d.stats.forget(vol.Path)
	d.log.Info("volume deleted", zap.String("volume", id), zap.String("pool", p.name()), zap.String("path", vol.Path))
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
	if _, _, err := d.findVolume(ctx, req.GetVolumeId(), req.GetVolumeContext()[VolumeContextPool]); err != nil {
		return nil, err
	}
	for i, c := range req.GetVolumeCapabilities() {
		if why := checkCapability(c); why != "" {
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
	p, vol, err := d.findVolume(ctx, req.GetVolumeId(), "")
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: d.createResponse(p, vol).GetVolume(),
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{},
	}, nil
}
