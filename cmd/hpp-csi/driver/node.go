package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
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
	id, target := req.GetVolumeId(), req.GetTargetPath()
	release, err := d.locks.acquire(id)
	if err != nil {
		return nil, err
	}
	defer release()

	// Volumes made by the KubeVirt driver carry its volume context, the
	// StorageClass parameters (possibly none): only storagePool is read
	// from it, as a hint; the volume is found wherever it is.
	var vol dirvol.Volume
	multiNode := false
	if isEphemeral(req.GetVolumeContext()) {
		var p *poolState
		p, vol, err = d.ensureEphemeral(ctx, req)
		multiNode = err == nil && p.shared()
	} else if err = d.checkPoolIdentity(id, req.GetVolumeContext()); err == nil {
		var l located
		l, multiNode, err = d.findForContext(ctx, id, req.GetVolumeContext())
		vol = l.vol
	}
	if err != nil {
		return nil, err
	}
	if why := checkCapability(req.GetVolumeCapability(), multiNode); why != "" {
		return nil, invalidArg("volume_capability: %s", why)
	}
	flags, _ := parseMountFlags(req.GetVolumeCapability().GetMount().GetMountFlags())
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	readOnly := req.GetReadonly() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	if err := d.bindOnce(vol, target, mode, readOnly, flags); err != nil {
		return nil, err
	}
	d.log.Info("volume published", zap.String("volume", id), zap.String("source", vol.Path),
		zap.String("target", target), zap.Bool("readOnly", readOnly))
	return &csi.NodePublishVolumeResponse{}, nil
}

// bindOnce mounts vol at target unless that exact volume is already there.
// A different volume at the target is an error, never silently replaced.
func (d *Driver) bindOnce(vol dirvol.Volume, target string, mode csi.VolumeCapability_AccessMode_Mode, readOnly bool, flags []string) error {
	mounted, err := d.deps.Mounter.IsMountPoint(target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return internal("checking target_path "+target, err)
	}
	if mounted {
		same, err := d.deps.FS.SameFile(vol.Path, target)
		if err != nil {
			return internal("comparing target_path with the volume", err)
		}
		if !same {
			return alreadyExists("target_path %s already has another volume mounted (not %s); unpublish it first", target, vol.Path)
		}
		return nil
	}
	if err := d.refuseSecondWriter(vol, target, mode); err != nil {
		return err
	}
	if err := d.deps.FS.MkdirAll(target, 0o750); err != nil {
		return internal("creating target_path", err)
	}
	if err := d.deps.Mounter.BindMount(vol.Path, target, readOnly, flags); err != nil {
		return internal(fmt.Sprintf("bind mounting %s at %s", vol.Path, target), err)
	}
	return nil
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
	id, target := req.GetVolumeId(), req.GetTargetPath()
	release, err := d.locks.acquire(id)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := d.unmountTarget(target); err != nil {
		return nil, err
	}
	if err := d.deleteIfEphemeral(ctx, id); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (d *Driver) unmountTarget(target string) error {
	// A target may carry more than one mount (a retried publish on an old
	// kernel); unmount until it is a plain directory.
	for range 8 {
		mounted, err := d.deps.Mounter.IsMountPoint(target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return internal("checking target_path "+target, err)
		}
		if !mounted {
			break
		}
		if err := d.deps.Mounter.Unmount(target); err != nil {
			return internal("unmounting "+target, err)
		}
	}
	// Remove refuses a non-empty directory: whatever is in a target that is
	// not a mount point is someone's data, and it is kept.
	if err := d.deps.FS.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return internal("removing target_path "+target+" (left in place: it is not a mount point and not empty)", err)
	}
	return nil
}

// refuseSecondWriter enforces SINGLE_NODE_SINGLE_WRITER (ReadWriteOncePod):
// a volume already published at another target is not published again.
func (d *Driver) refuseSecondWriter(vol dirvol.Volume, target string, mode csi.VolumeCapability_AccessMode_Mode) error {
	if mode != csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
		return nil
	}
	targets, err := d.deps.Mounter.BindTargets(vol.Path)
	if err != nil {
		return internal("listing where the volume is mounted", err)
	}
	for _, t := range targets {
		if t != target {
			return failedPrecondition(
				"volume %q has access mode SINGLE_NODE_SINGLE_WRITER and is already published at %s", vol.ID, t)
		}
	}
	return nil
}
