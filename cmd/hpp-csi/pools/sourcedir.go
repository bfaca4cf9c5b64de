package pools

import (
	"context"
)

// OpenSourceDir finds src on this node for another node to stream
// (the serving side of cross-node clones, cmd/hpp-csi/remote): the
// directory that holds its tree, and allocated, the bytes that tree
// holds (st_blocks*512 summed over one walk, hard links once: data, not
// holes; the size of the transfer). It holds src's lock, as a local clone
// does (resolveSource), so the source is not deleted while it is read;
// release gives it back and must be called once. A source this node does
// not hold is NotFound; one busy with another operation is Busy.
func (rt *Runtime) OpenSourceDir(ctx context.Context, src Source) (dir string, allocated int64, release func(), err error) {
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
	}
	usage, err := rt.deps.FS.Usage(ctx, dir)
	if err != nil {
		release()
		return "", 0, nil, wrap("measuring "+src.key(), err)
	}
	return dir, usage.Bytes, release, nil
}
