package pools

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// commit makes the volume c describes in pool p's store: staged, given
// r's project ID, filled (Spec.Fill: the copy of its source, if any),
// renamed into place and labelled for SELinux; a failure gives the project ID
// back. A volume found already there is returned with made false. A copy
// from another node commits through it too, in its job, so both kinds of
// clone are made the same way.
func (rt *Runtime) commit(ctx context.Context, p *poolState, store *dirvol.Store, c Creation, r room) (vol dirvol.Volume, made bool, err error) {
	c.Spec.Fill = staged(r, c.Spec.Fill)
	vol, created, err := store.Create(ctx, c.ID, c.Spec)
	if err != nil {
		r.undo()
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
		r.undo()
		return vol, false, wrap("labelling "+c.What+" for SELinux", err)
	}
	rt.log.Info("volume created", zap.String("volume", c.ID), zap.String("kind", string(c.Spec.Kind)), zap.String("pool", p.name()),
		zap.String("path", vol.Path), zap.Int64("capacityBytes", c.Spec.CapacityBytes))
	return vol, true, nil
}

// staged is a new volume's Fill: r's project ID set on the staged
// directory before any content is copied in (a clone's or restore's data
// is charged to the new volume, never to its source), then the content
// (none when content is nil).
func staged(r room, content func(dir string) error) func(dir string) error {
	if r.quota == nil {
		return content
	}
	return func(dir string) error {
		if err := r.quota(dir); err != nil {
			return err
		}
		if content != nil {
			return content(dir)
		}
		return nil
	}
}
