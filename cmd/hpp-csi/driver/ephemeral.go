package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Inline ephemeral volumes are directories that live exactly as long as the
// pod. They are told apart from persistent volumes by the Kind recorded in
// their metadata when they are made, never by the shape of their id: a
// persistent volume whose id happens to look like kubelet's "csi-<hash>"
// must never be deleted by an unpublish.

func (d *Driver) ensureEphemeral(ctx context.Context, req *csi.NodePublishVolumeRequest) (*poolState, dirvol.Volume, error) {
	id := req.GetVolumeId()
	params, err := parseParams(req.GetVolumeContext())
	if err != nil {
		return nil, dirvol.Volume{}, err
	}
	p, err := d.selectPool(params.storagePool)
	if err != nil {
		return nil, dirvol.Volume{}, err
	}
	if why := checkCapability(req.GetVolumeCapability(), p.shared()); why != "" {
		return nil, dirvol.Volume{}, invalidArg("volume_capability: %s", why)
	}
	vol, err := d.provision(ctx, provisioning{
		pool: p, id: id, what: "ephemeral volume",
		spec: dirvol.Spec{
			Ownership:  params.ownership,
			Kind:       dirvol.KindEphemeral,
			Attributes: map[string]string{podUIDContextKey: req.GetVolumeContext()[podUIDContextKey]},
		},
		accept: func(existing dirvol.Volume) error {
			if existing.Kind != dirvol.KindEphemeral {
				return alreadyExists("volume %q already exists as a persistent volume in storage pool %q; refusing to use it as an inline ephemeral volume", id, p.name())
			}
			return nil
		},
	})
	return p, vol, err
}

func (d *Driver) deleteIfEphemeral(ctx context.Context, id string) error {
	l, err := d.findOwnVolume(ctx, id, "")
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.vol.Kind != dirvol.KindEphemeral {
		return nil
	}
	if err := d.deleteVolume(ctx, l, "ephemeral volume"); err != nil {
		return err
	}
	d.log.Info("ephemeral volume deleted", zap.String("volume", id), zap.String("pool", l.pool.name()))
	return nil
}
