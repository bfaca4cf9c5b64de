package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

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
	if d.anySnapshots() {
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
	cr, err := validateCreateRequest(d.cfg.Pools, req)
	if err != nil {
		return nil, err
	}
	p, _ := d.poolNamed(cr.pool.Name)
	// A shared pool's volumes are on every node: any node may make them,
	// whatever topology the CO asks for, and Immediate binding is fine.
	if !p.shared() {
		if err := d.wantsThisNode(req.GetAccessibilityRequirements()); err != nil {
			return nil, err
		}
		if err := d.refuseImmediate(ctx, req.GetParameters()); err != nil {
			return nil, err
		}
	}
	release, err := d.locks.acquire(cr.name)
	if err != nil {
		return nil, err
	}
	defer release()
	spec := dirvol.Spec{
		Ownership:     cr.params.ownership,
		CapacityBytes: cr.size,
		Kind:          dirvol.KindPersistent,
		Attributes:    creationAttributes(req.GetParameters()),
	}
	src := req.GetVolumeContentSource()
	if src != nil {
		done, err := d.withSource(ctx, p, cr, src, &spec)
		if err != nil {
			return nil, err
		}
		defer done()
	}
	vol, err := d.provision(ctx, provisioning{
		pool: p, id: cr.name, what: "volume", spec: spec,
		accept: func(existing dirvol.Volume) error {
			if !compatible(existing.CapacityBytes, req.GetCapacityRange()) {
				return alreadyExists("volume %q already exists with capacity %d bytes, incompatible with the requested range [%d, %d]",
					cr.name, existing.CapacityBytes, req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes())
			}
			if got, want := existing.Attributes[contentSourceAttr], sourceKey(src); got != want {
				return alreadyExists("volume %q already exists with content source %q, not %q", cr.name, got, want)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	resp := d.createResponse(p, vol)
	resp.Volume.ContentSource = src
	return resp, nil
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

// createResponse describes a volume. A shared pool's volume carries no
// topology: per the CSI spec it is then accessible from every node.
func (d *Driver) createResponse(p *poolState, vol dirvol.Volume) *csi.CreateVolumeResponse {
	v := &csi.Volume{
		VolumeId:      vol.ID,
		CapacityBytes: vol.CapacityBytes,
		VolumeContext: map[string]string{contract.ParamStoragePool: p.name()},
	}
	d.volumeContextIdentity(p, v.VolumeContext)
	if !p.shared() {
		v.AccessibleTopology = []*csi.Topology{d.topology()}
	}
	return &csi.CreateVolumeResponse{Volume: v}
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
	l, err := d.findVolume(ctx, id, "")
	if isNotFound(err) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := d.deleteVolume(ctx, l, "volume"); err != nil {
		return nil, err
	}
	d.log.Info("volume deleted", zap.String("volume", id), zap.String("pool", l.pool.name()), zap.String("path", l.vol.Path))
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
		return nil, err
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
	l, err := d.findVolume(ctx, req.GetVolumeId(), "")
	if err != nil {
		return nil, err
	}
	v := d.createResponse(l.pool, l.vol).GetVolume()
	if l.inLegacy() {
		v.VolumeContext[contract.VolumeContextLayout] = contract.LayoutLegacy
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: v,
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{},
	}, nil
}
