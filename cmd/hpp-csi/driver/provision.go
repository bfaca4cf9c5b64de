package driver

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// provisioning is one volume to make: by CreateVolume (persistent) or by
// the publish of an inline ephemeral volume. Both go through provision, so
// they refuse, create, label and undo the same way.
type provisioning struct {
	pool *poolState
	id   string
	spec dirvol.Spec
	// accept says whether a volume already there under id is the one asked
	// for (a retry) or must be refused; it returns a handler error.
	accept func(existing dirvol.Volume) error
	// what names the volume in errors and logs ("volume", "ephemeral volume").
	what string
}

// provision makes the volume, or returns the one already there when accept
// takes it. The caller holds the id's lock. A volume that cannot be labelled
// for SELinux is removed again, so the CO's retry starts clean; if that
// removal fails too, both errors are returned.
func (d *Driver) provision(ctx context.Context, r provisioning) (dirvol.Volume, error) {
	store, err := d.storeOf(r.pool.own)
	if err != nil {
		return dirvol.Volume{}, toStatus("opening pool", err)
	}
	if err := d.refuseSameNameElsewhere(ctx, r.id, r.pool); err != nil {
		return dirvol.Volume{}, err
	}
	existing, err := store.Get(ctx, r.id)
	switch {
	case err == nil:
		if err := r.accept(existing); err != nil {
			return dirvol.Volume{}, err
		}
		return existing, nil
	case !errors.Is(err, dirvol.ErrNotFound):
		return dirvol.Volume{}, toStatus("looking up "+r.what, err)
	}
	if err := d.checkFits(ctx, r.pool, store, r.spec.CapacityBytes); err != nil {
		return dirvol.Volume{}, err
	}
	undoQuota, err := d.enforced(r.pool, r.id, &r.spec)
	if err != nil {
		return dirvol.Volume{}, err
	}
	vol, created, err := store.Create(ctx, r.id, r.spec)
	if err != nil {
		undoQuota()
		return dirvol.Volume{}, toStatus("creating "+r.what+" directory", err)
	}
	d.step("create.published")
	if !created {
		// Made between Get and Create by another process on a shared pool.
		if err := r.accept(vol); err != nil {
			return dirvol.Volume{}, err
		}
		return vol, nil
	}
	if err := d.deps.Labeler.Relabel(ctx, vol.Path); err != nil {
		// An unlabelled volume would fail in the pod on an SELinux host.
		if derr := store.Delete(ctx, r.id); derr != nil {
			d.log.Error("removing unlabelled volume failed", zap.String("volume", r.id), zap.Error(derr))
			return dirvol.Volume{}, toStatus("labelling "+r.what+" for SELinux", errors.Join(err,
				errors.New("removing the unlabelled directory also failed (a retry removes or reuses it): "+derr.Error())))
		}
		undoQuota()
		return dirvol.Volume{}, toStatus("labelling "+r.what+" for SELinux", err)
	}
	d.log.Info("volume created", zap.String("volume", r.id), zap.String("kind", string(r.spec.Kind)), zap.String("pool", r.pool.name()),
		zap.String("path", vol.Path), zap.Int64("capacityBytes", r.spec.CapacityBytes))
	return vol, nil
}

// refuseSameNameElsewhere keeps a name unique across the node's pools: the
// same name with another storagePool is a different volume, not a retry.
func (d *Driver) refuseSameNameElsewhere(ctx context.Context, name string, want *poolState) error {
	for _, p := range d.pools {
		if p == want {
			continue
		}
		store, err := d.storeOf(p.own)
		if err != nil {
			continue
		}
		if _, err := store.Get(ctx, name); err == nil {
			return alreadyExists("volume %q already exists in storage pool %q, not in the requested pool %q", name, p.name(), want.name())
		}
	}
	return nil
}
