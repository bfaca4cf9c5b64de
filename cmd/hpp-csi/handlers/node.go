package handlers

import (
	"context"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             d.cfg.NodeID,
		MaxVolumesPerNode:  d.cfg.MaxVolumesPerNode,
		AccessibleTopology: d.topology(),
	}, nil
}

func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	types := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH,
		// Enforcing pools raise a volume's limit on the node (expand.go).
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	}
	resp := &csi.NodeGetCapabilitiesResponse{}
	for _, t := range types {
		resp.Capabilities = append(resp.Capabilities, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

func validatePublish(req *csi.NodePublishVolumeRequest) error {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	if err := validatePath("target_path", req.GetTargetPath()); err != nil {
		return err
	}
	if req.GetStagingTargetPath() != "" {
		return invalidArg("staging_target_path: must be empty, hpp-csi has no STAGE_UNSTAGE_VOLUME capability")
	}
	if req.GetVolumeCapability() == nil {
		return invalidArg("volume_capability: required")
	}
	// Multi-node modes are checked once the volume's pool is known: a
	// shared pool allows them.
	if why := checkCapability(req.GetVolumeCapability(), true); why != "" {
		return invalidArg("volume_capability: %s", why)
	}
	return nil
}

func isEphemeral(volCtx map[string]string) bool {
	return strings.EqualFold(volCtx[ephemeralContextKey], "true")
}

func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := validatePublish(req); err != nil {
		return nil, err
	}
	if err := d.underLock("NodePublishVolume", req.GetVolumeId(), func() error { return d.publish(ctx, req) }); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// underLock runs f holding volume id's lock, so that a publication, an
// unpublication and a deletion of one volume never interleave; op names
// the call in the gRPC error.
func (d *Driver) underLock(op, id string, f func() error) error {
	release, err := d.pools.Lock(id)
	if err != nil {
		return toStatus(op, err)
	}
	defer release()
	return toStatus(op, f())
}

// publish mounts the volume of a validated request at its target; the
// caller holds the volume's lock.
func (d *Driver) publish(ctx context.Context, req *csi.NodePublishVolumeRequest) error {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	// Volumes made by the KubeVirt driver carry its volume context, the
	// StorageClass parameters (possibly none): only storagePool is read
	// from it, as a hint; the volume is found wherever it is.
	var vol pools.Volume
	var err error
	multiNode := false
	if isEphemeral(req.GetVolumeContext()) {
		vol, err = d.ensureEphemeral(ctx, req)
		multiNode = err == nil && vol.Shared()
	} else if err = d.checkPoolIdentity(id, req.GetVolumeContext()); err == nil {
		vol, multiNode, err = d.findForContext(ctx, id, req.GetVolumeContext())
	}
	if err != nil {
		return err
	}
	if why := checkCapability(req.GetVolumeCapability(), multiNode); why != "" {
		return invalidArg("volume_capability: %s", why)
	}
	flags, _ := parseMountFlags(req.GetVolumeCapability().GetMount().GetMountFlags())
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	readOnly := req.GetReadonly() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	if err := d.pools.Publish(vol, pools.Publication{Target: target, ReadOnly: readOnly, Flags: flags,
		SingleWriter: mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER}); err != nil {
		return err
	}
	d.log.Info("volume published", zap.String("volume", id), zap.String("source", vol.Path),
		zap.String("target", target), zap.Bool("readOnly", readOnly))
	return nil
}

// checkPoolIdentity refuses to publish a volume whose volume context
// records a pool identity that is not its pool's identity now.
func (d *Driver) checkPoolIdentity(id string, volCtx map[string]string) error {
	return d.pools.CheckIdentity(id, volCtx[contract.ParamStoragePool], volCtx[contract.VolumeContextPoolID])
}

func validateUnpublish(req *csi.NodeUnpublishVolumeRequest) error {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	return validatePath("target_path", req.GetTargetPath())
}

// NodeUnpublishVolume unmounts and removes the (empty) target directory.
// It never removes volume data, except that an inline ephemeral volume,
// recognised by the marker in its metadata, dies with its pod.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := validateUnpublish(req); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := d.underLock("NodeUnpublishVolume", id, func() error {
		if err := d.pools.Unpublish(req.GetTargetPath()); err != nil {
			return err
		}
		return d.deleteIfEphemeral(ctx, id)
	}); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
