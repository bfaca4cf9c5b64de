package pools

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Creation is one volume to make: by CreateVolume (persistent, maybe from
// a content source) or by the publish of an inline ephemeral volume. Both
// go through Create, so they refuse, create, label and undo the same way.
type Creation struct {
	// Pool is the pool's name, as the request's storagePool rules chose it.
	Pool string
	ID   string
	Spec dirvol.Spec
	// Source, when set, is copied into the new volume before it is
	// published.
	Source *Source
	// Accept says whether a volume already there under ID is the one asked
	// for (a retry) or must be refused; it returns the caller's error. A
	// volume made from another source (or none) is refused after it.
	Accept func(existing dirvol.Volume) error
	// What names the volume in errors and logs ("volume", "ephemeral volume").
	What string
	// Claim is the PVC the volume is made for, when the request says
	// (csi-provisioner's --extra-create-metadata); a source on another node
	// is served only for a named claim (remote.go).
	Claim ClaimRef
}

// Create makes the volume, or returns the one already there when Accept
// takes it. The caller holds the id's lock (Lock). A volume that cannot be
// labelled for SELinux is removed again, so the CO's retry starts clean; if
// that removal fails too, both errors are returned.
func (rt *Runtime) Create(ctx context.Context, c Creation) (Volume, error) {
	p, ok := rt.poolNamed(c.Pool)
	if !ok {
		return Volume{}, refuse(Invalid, "storage pool %q is not configured on node %s", c.Pool, rt.cfg.NodeID)
	}
	store, err := rt.storeOf(p.own)
	if err != nil {
		return Volume{}, wrap("opening pool", err)
	}
	accept := func(existing dirvol.Volume) (Volume, error) {
		if err := c.Accept(existing); err != nil {
			return Volume{}, err
		}
		if got, want := existing.Attributes[contentSourceAttr], c.Source.key(); got != want {
			return Volume{}, refuse(Exists, "volume %q already exists with content source %q, not %q", c.ID, got, want)
		}
		return Volume{pool: p, root: p.own, store: store, Volume: existing}, nil
	}
	if err := rt.refuseSameNameElsewhere(ctx, c.ID, p); err != nil {
		return Volume{}, err
	}
	// A copy from another node outlives the request that started it: the
	// CO's retry asks here how it is going, or gets how it ended.
	if err := rt.copies.collect(c.ID, p, c.Source.key()); err != nil {
		return Volume{}, err
	}
	existing, err := store.Get(ctx, c.ID)
	switch {
	case err == nil:
		return accept(existing)
	case !errors.Is(err, dirvol.ErrNotFound):
		return Volume{}, wrap("looking up "+c.What, err)
	}
	// Only a volume still to be made needs its source: a retry of a
	// finished clone was accepted above, even if the source is gone since.
	if c.Source != nil {
		release, err := rt.withSource(ctx, p, c.ID, *c.Source, &c.Spec)
		if isNotFound(err) && rt.deps.Remote != nil {
			return rt.copyFromRemote(ctx, p, store, c, accept)
		}
		if err != nil {
			return Volume{}, err
		}
		defer release()
	}
	if err := rt.checkFits(ctx, p, store, c.Spec.CapacityBytes); err != nil {
		return Volume{}, err
	}
	undoQuota, err := rt.enforced(p, c.ID, &c.Spec)
	if err != nil {
		return Volume{}, err
	}
	vol, created, err := rt.publish(ctx, p, store, c, undoQuota)
	if err != nil {
		return Volume{}, err
	}
	if !created {
		// Made between Get and Create by another process on a shared pool.
		return accept(vol)
	}
	return Volume{pool: p, root: p.own, store: store, Volume: vol}, nil
}

// publish makes the volume c describes (its Spec filled, sized and
// enforced) in store, labels it, and undoes the quota when it fails. A
// volume found already there is returned with created false. A copy from
// another node publishes through it too, in its job, so both kinds of
// clone are made the same way.
func (rt *Runtime) publish(ctx context.Context, p *poolState, store *dirvol.Store, c Creation, undoQuota func()) (dirvol.Volume, bool, error) {
	vol, created, err := store.Create(ctx, c.ID, c.Spec)
	if err != nil {
		undoQuota()
		return vol, false, wrap("creating "+c.What+" directory", err)
	}
	rt.step("create.published")
	if !created {
		return vol, false, nil
	}
	if err := rt.deps.Labeler.Relabel(ctx, vol.Path); err != nil {
		// An unlabelled volume would fail in the pod on an SELinux host.
		if derr := store.Delete(ctx, c.ID); derr != nil {
			rt.log.Error("removing unlabelled volume failed", zap.String("volume", c.ID), zap.Error(derr))
			return vol, false, wrap("labelling "+c.What+" for SELinux", errors.Join(err,
				errors.New("removing the unlabelled directory also failed (a retry removes or reuses it): "+derr.Error())))
		}
		undoQuota()
		return vol, false, wrap("labelling "+c.What+" for SELinux", err)
	}
	rt.log.Info("volume created", zap.String("volume", c.ID), zap.String("kind", string(c.Spec.Kind)), zap.String("pool", p.name()),
		zap.String("path", vol.Path), zap.Int64("capacityBytes", c.Spec.CapacityBytes))
	return vol, true, nil
}

// refuseSameNameElsewhere keeps a name unique across the node's pools: the
// same name with another storagePool is a different volume, not a retry.
func (rt *Runtime) refuseSameNameElsewhere(ctx context.Context, name string, want *poolState) error {
	for _, p := range rt.pools {
		if p == want {
			continue
		}
		store, err := rt.storeOf(p.own)
		if err != nil {
			continue
		}
		if _, err := store.Get(ctx, name); err == nil {
			return refuse(Exists, "volume %q already exists in storage pool %q, not in the requested pool %q", name, p.name(), want.name())
		}
	}
	return nil
}
