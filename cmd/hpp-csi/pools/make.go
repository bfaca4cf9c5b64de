package pools

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// make makes the volume that pl and r are ready for: committed now,
// empty or as a copy of a source on this node; or, for a source on
// another node, by a copy job that outlives the request (makeremote.go).
// made is false when the volume was found made instead (by another
// process on a shared pool, or by the job): the caller accepts or refuses
// it.
func (rt *Runtime) make(ctx context.Context, pl placement, c Creation, src content, r room) (vol dirvol.Volume, made bool, err error) {
	if !src.remote {
		if src.key != "" {
			c.Spec.Fill = rt.copyIn(ctx, pl.pool, c.ID, src)
		}
		return rt.commit(ctx, pl.pool, pl.store, c, r)
	}
	return rt.makeRemote(ctx, pl, c, r)
}

// copyIn is the copy of a source on this node into a staged volume
// directory: a reflink where the pool's filesystem
// can, data otherwise; made durable before the volume is committed.
func (rt *Runtime) copyIn(ctx context.Context, p *poolState, name string, src content) func(dir string) error {
	mode := p.copyMode()
	return func(dir string) error {
		start := time.Now()
		stats, err := treecopy.Tree(ctx, src.dir, dir, mode)
		if err != nil {
			return err
		}
		if err := treecopy.Syncfs(dir); err != nil {
			return err
		}
		rt.log.Info("volume content copied", zap.String("volume", name), zap.String("source", src.key), zap.String("copy", mode.String()),
			zap.Int64("files", stats.Files), zap.Int64("reflinkedFiles", stats.Reflinked), zap.Int64("bytes", stats.Bytes),
			zap.Duration("took", time.Since(start)))
		return nil
	}
}
