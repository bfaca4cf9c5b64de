package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Inline ephemeral volumes are directories that live exactly as long as the
// pod. They are told apart from persistent volumes by the Kind recorded in
// their metadata when they are made, never by the shape of their id: a
// persistent volume whose id happens to look like kubelet's "csi-<hash>"
// must never be deleted by an unpublish.

func (d *Driver) ensureEphemeral(ctx context.Context, req *csi.NodePublishVolumeRequest) (pools.Volume, error) {
	id := req.GetVolumeId()
	params, err := parseParams(req.GetVolumeContext())
	if err != nil {
		return pools.Volume{}, err
	}
	p, err := d.selectPool(params.storagePool)
	if err != nil {
		return pools.Volume{}, err
	}
	if why := checkCapability(req.GetVolumeCapability(), p.Shared); why != "" {
		return pools.Volume{}, invalidArg("volume_capability: %s", why)
	}
	return d.pools.Create(ctx, pools.Creation{
		Pool: p.Name, ID: id, What: "ephemeral volume",
		Spec: dirvol.Spec{
			Ownership:  params.ownership,
			Kind:       dirvol.KindEphemeral,
			Attributes: map[string]string{podUIDContextKey: req.GetVolumeContext()[podUIDContextKey]},
		},
		Accept: func(existing dirvol.Volume) error {
			if existing.Kind != dirvol.KindEphemeral {
				return alreadyExists("volume %q already exists as a persistent volume in storage pool %q; refusing to use it as an inline ephemeral volume", id, p.Name)
			}
			return nil
		},
	})
}

func (d *Driver) deleteIfEphemeral(ctx context.Context, id string) error {
	vol, err := d.pools.FindOwn(ctx, id, "")
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if vol.Kind != dirvol.KindEphemeral {
		return nil
	}
	if err := d.pools.Delete(ctx, vol, "ephemeral volume"); err != nil {
		return err
	}
	d.log.Info("ephemeral volume deleted", zap.String("volume", id), zap.String("pool", vol.Pool()))
	return nil
}

// selectPool applies the storagePool rules of the compatibility contract.
func (d *Driver) selectPool(storagePool string) (pool.Pool, error) {
	p, err := d.cfg.Pools.Select(storagePool)
	if err != nil {
		return pool.Pool{}, invalidArg("%v", err)
	}
	return p, nil
}
