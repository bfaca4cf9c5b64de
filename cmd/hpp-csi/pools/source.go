package pools

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// contentSourceAttr records in a volume's attributes what it was made
// from ("snapshot:<id>" or "volume:<id>"), so that a retried CreateVolume
// is told apart from a different request with the same name.
const contentSourceAttr = "hpp.kubevirt.io/content-source"

// Source is what a clone or restore copies: a snapshot or a volume, by id.
type Source struct {
	Snapshot bool
	ID       string
}

// key is what contentSourceAttr records for s ("" for none).
func (s *Source) key() string {
	switch {
	case s == nil:
		return ""
	case s.Snapshot:
		return "snapshot:" + s.ID
	}
	return "volume:" + s.ID
}

// contentSource is a resolved source: the directory to copy, its size, and
// the lock that keeps it from being deleted meanwhile.
type contentSource struct {
	key     string
	dir     string
	size    int64
	release func()
}

// resolveSource finds the source of a clone or restore on this node.
// Sources are node-local like volumes: one on another node (or none) is
// NotFound, the CSI spec's code for a missing source, with a message
// saying where a clone is made. A source larger than the request is
// TooLarge.
func (rt *Runtime) resolveSource(ctx context.Context, src Source, name string, size int64) (contentSource, error) {
	cs := contentSource{key: src.key()}
	if src.Snapshot {
		release, err := rt.LockSnapshot(src.ID)
		if err != nil {
			return cs, err
		}
		_, snap, err := rt.findSnapshot(ctx, src.ID)
		if err != nil {
			release()
			if isNotFound(err) {
				return cs, refuse(NotFound, "volume_content_source: snapshot %q does not exist on node %s (a volume is restored on the node that holds its snapshot)", src.ID, rt.cfg.NodeID)
			}
			return cs, err
		}
		cs.dir, cs.size, cs.release = snap.Data, snap.SizeBytes, release
	} else {
		if src.ID == name {
			return cs, refuse(Invalid, "volume_content_source.volume.volume_id: %q is the volume being created", src.ID)
		}
		release, err := rt.Lock(src.ID)
		if err != nil {
			return cs, err
		}
		l, err := rt.Find(ctx, src.ID)
		if err != nil {
			release()
			if isNotFound(err) || KindOf(err) == Invalid {
				return cs, refuse(NotFound, "volume_content_source: volume %q does not exist on node %s (a clone is made on the node that holds its source)", src.ID, rt.cfg.NodeID)
			}
			return cs, err
		}
		cs.dir, cs.size, cs.release = l.Path, l.CapacityBytes, release
	}
	if size > 0 && cs.size > size {
		cs.release()
		return cs, refuse(TooLarge, "volume_content_source: %s is %d bytes, more than the requested %d bytes", cs.key, cs.size, size)
	}
	return cs, nil
}

// fill returns the copy of the source into a staged volume directory: a
// reflink where the pool's filesystem can, data otherwise; made durable
// before the volume is published.
func (rt *Runtime) fill(ctx context.Context, p *poolState, name string, cs contentSource) func(dir string) error {
	mode := p.copyMode()
	return func(dir string) error {
		start := time.Now()
		stats, err := treecopy.Tree(ctx, cs.dir, dir, mode)
		if err != nil {
			return err
		}
		if err := treecopy.Syncfs(dir); err != nil {
			return err
		}
		rt.log.Info("volume content copied", zap.String("volume", name), zap.String("source", cs.key), zap.String("copy", mode.String()),
			zap.Int64("files", stats.Files), zap.Int64("reflinkedFiles", stats.Reflinked), zap.Int64("bytes", stats.Bytes),
			zap.Duration("took", time.Since(start)))
		return nil
	}
}

// withSource prepares spec, of a volume not made yet, to be filled from
// src. It returns the release of the source's lock.
func (rt *Runtime) withSource(ctx context.Context, p *poolState, name string, src Source, spec *dirvol.Spec) (func(), error) {
	cs, err := rt.resolveSource(ctx, src, name, spec.CapacityBytes)
	if err != nil {
		return nil, err
	}
	if spec.Attributes == nil {
		spec.Attributes = map[string]string{}
	}
	spec.Attributes[contentSourceAttr] = src.key()
	if spec.CapacityBytes == 0 {
		spec.CapacityBytes = cs.size
	}
	spec.Fill = rt.fill(ctx, p, name, cs)
	return cs.release, nil
}
