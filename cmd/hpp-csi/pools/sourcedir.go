package pools

import (
	"context"

	"go.uber.org/zap"
)

// OpenSourceDir finds src on this node for another node to stream
// (the serving side of cross-node clones, cmd/hpp-csi/remote): the
// directory that holds its tree, and allocated, the bytes that tree
// holds (st_blocks*512 summed over one walk, hard links once: data, not
// holes; the size of the transfer; 0 when the walk failed or took longer
// than Config.StatsTimeout). It holds src's lock, as a local clone
// does (source.go), so the source is not deleted while it is read;
// release gives it back and must be called once. A source this node does
// not hold is NotFound; one busy with another operation is Busy.
//
// generation is src's generation (clonecache.go), read under the lock: no
// read-write publish can start while the lock is held, so the tree read
// until release is the tree at that generation.
func (rt *Runtime) OpenSourceDir(ctx context.Context, src Source) (dir string, allocated int64, generation string, release func(), err error) {
	dir, allocated, release, err = rt.openSourceDir(ctx, src, &generation)
	return dir, allocated, generation, release, err
}

func (rt *Runtime) openSourceDir(ctx context.Context, src Source, generation *string) (dir string, allocated int64, release func(), err error) {
	if src.Snapshot {
		release, err = rt.LockSnapshot(src.ID)
		if err != nil {
			return "", 0, nil, err
		}
		_, snap, err := rt.findSnapshot(ctx, src.ID)
		if err != nil {
			release()
			return "", 0, nil, err
		}
		dir = snap.Data
		*generation = snapshotGeneration(snap.Created.UnixNano())
	} else {
		release, err = rt.Lock(src.ID)
		if err != nil {
			return "", 0, nil, err
		}
		l, err := rt.Find(ctx, src.ID)
		if err != nil {
			release()
			if KindOf(err) == Invalid {
				return "", 0, nil, refuse(NotFound, "volume %q does not exist on node %s: %v", src.ID, rt.cfg.NodeID, err)
			}
			return "", 0, nil, err
		}
		dir = l.Path
		if *generation, err = rt.volumeGeneration(l); err != nil {
			release()
			return "", 0, nil, err
		}
	}
	// One walk, bounded like a stats walk (--stats-timeout): the figure
	// only informs the receiver, so a walk that fails or takes too long
	// makes it 0 (unknown) rather than failing the clone.
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if rt.cfg.StatsTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, rt.cfg.StatsTimeout)
	}
	defer cancel()
	usage, err := rt.deps.FS.Usage(wctx, dir)
	if err != nil {
		if ctx.Err() != nil {
			release()
			return "", 0, nil, wrap("measuring "+src.key(), ctx.Err())
		}
		rt.log.Warn("cannot measure a source served to a peer; its size is sent as unknown", zap.String("source", src.key()), zap.Error(err))
		return dir, 0, release, nil
	}
	return dir, usage.Bytes, release, nil
}
