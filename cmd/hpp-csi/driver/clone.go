package driver

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// contentSourceAttr records in a volume's attributes what it was made
// from ("snapshot:<id>" or "volume:<id>"), so that a retried CreateVolume
// is told apart from a different request with the same name.
const contentSourceAttr = "hpp.kubevirt.io/content-source"

// sourceKey is what contentSourceAttr records for src ("" for none).
func sourceKey(src *csi.VolumeContentSource) string {
	switch {
	case src.GetSnapshot() != nil:
		return "snapshot:" + src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		return "volume:" + src.GetVolume().GetVolumeId()
	}
	return ""
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
// OutOfRange.
func (d *Driver) resolveSource(ctx context.Context, src *csi.VolumeContentSource, name string, size int64) (contentSource, error) {
	cs := contentSource{key: sourceKey(src)}
	var lockKey string
	switch {
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		lockKey = snapLockKey(id)
		release, err := d.locks.acquire(lockKey)
		if err != nil {
			return cs, err
		}
		_, snap, err := d.findSnapshot(ctx, id)
		if err != nil {
			release()
			if isNotFound(err) {
				return cs, notFound("volume_content_source: snapshot %q does not exist on node %s (a volume is restored on the node that holds its snapshot)", id, d.cfg.NodeID)
			}
			return cs, err
		}
		cs.dir, cs.size, cs.release = snap.Data, snap.SizeBytes, release
	default:
		id := src.GetVolume().GetVolumeId()
		if id == name {
			return cs, invalidArg("volume_content_source.volume.volume_id: %q is the volume being created", id)
		}
		release, err := d.locks.acquire(id)
		if err != nil {
			return cs, err
		}
		l, err := d.findVolume(ctx, id, "")
		if err != nil {
			release()
			if isNotFound(err) || status.Code(err) == codes.InvalidArgument {
				return cs, notFound("volume_content_source: volume %q does not exist on node %s (a clone is made on the node that holds its source)", id, d.cfg.NodeID)
			}
			return cs, err
		}
		cs.dir, cs.size, cs.release = l.vol.Path, l.vol.CapacityBytes, release
	}
	if size > 0 && cs.size > size {
		cs.release()
		return cs, errCode(codes.OutOfRange, "volume_content_source: %s is %d bytes, more than the requested %d bytes", cs.key, cs.size, size)
	}
	return cs, nil
}

// fill returns the copy of the source into a staged volume directory: a
// reflink where the pool's filesystem can, data otherwise; made durable
// before the volume is published.
func (d *Driver) fill(ctx context.Context, p *poolState, name string, cs contentSource) func(dir string) error {
	mode := d.snapModeOf(p)
	return func(dir string) error {
		start := time.Now()
		stats, err := treecopy.Tree(ctx, cs.dir, dir, mode)
		if err != nil {
			return err
		}
		if err := treecopy.Syncfs(dir); err != nil {
			return err
		}
		d.log.Info("volume content copied", zap.String("volume", name), zap.String("source", cs.key), zap.String("copy", mode.String()),
			zap.Int64("files", stats.Files), zap.Int64("reflinkedFiles", stats.Reflinked), zap.Int64("bytes", stats.Bytes),
			zap.Duration("took", time.Since(start)))
		return nil
	}
}

func (d *Driver) snapModeOf(p *poolState) treecopy.Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copies.mode
}

// withSource prepares spec to be filled from src when the volume does not
// exist yet (a retry of a finished clone needs its source no more). It
// returns the release of the source's lock.
func (d *Driver) withSource(ctx context.Context, p *poolState, cr createRequest, src *csi.VolumeContentSource, spec *dirvol.Spec) (func(), error) {
	spec.Attributes[contentSourceAttr] = sourceKey(src)
	if store, err := d.storeOf(p.own); err == nil {
		if _, err := store.Get(ctx, cr.name); err == nil {
			return func() {}, nil
		}
	}
	cs, err := d.resolveSource(ctx, src, cr.name, cr.size)
	if err != nil {
		return nil, err
	}
	if spec.CapacityBytes == 0 {
		spec.CapacityBytes = cs.size
	}
	spec.Fill = d.fill(ctx, p, cr.name, cs)
	return cs.release, nil
}
