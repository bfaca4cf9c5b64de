package pools

import (
	"context"
	"fmt"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// VolumeStats is what a volume uses and may still use, in bytes and inodes.
type VolumeStats struct {
	UsedBytes, AvailableBytes, TotalBytes    int64
	UsedInodes, AvailableInodes, TotalInodes int64
}

// Exists reports whether path exists on the node (a publish target).
func (rt *Runtime) Exists(path string) (bool, error) { return rt.deps.FS.Exists(path) }

// Stats measures a volume: an enforced one from the kernel's quota
// accounting, any other by a walk, cached and bounded in time.
func (rt *Runtime) Stats(ctx context.Context, l Volume) (VolumeStats, error) {
	if st, ok, err := rt.quotaStats(l); ok || err != nil {
		return st, err
	}
	used, err := rt.stats.get(ctx, l.Path, func(u dirvol.Usage) { l.store.NoteUsage(l.ID, u.Bytes) })
	if err != nil {
		return VolumeStats{}, wrap("measuring volume usage", err)
	}
	st, err := rt.deps.FS.Statfs(l.root.path)
	if err != nil {
		return VolumeStats{}, failed(fmt.Sprintf("statfs of pool %q", l.pool.name()), err)
	}
	available := capacity.Offered(st, l.pool.headroom)
	return VolumeStats{
		UsedBytes: used.Bytes, AvailableBytes: available, TotalBytes: used.Bytes + available,
		UsedInodes: used.Inodes, AvailableInodes: st.FreeInodes, TotalInodes: used.Inodes + st.FreeInodes,
	}, nil
}

// quotaStats measures an enforced volume from the kernel's quota
// accounting, without a walk: the limit is the total, and what is
// available is what the limit leaves, bounded by the filesystem's free
// space. ok is false for a volume without a project quota (its stats come
// from the walk, and its total is its usage plus what the pool offers: it
// has no size limit, as its health says).
func (rt *Runtime) quotaStats(l Volume) (VolumeStats, bool, error) {
	q := l.pool.ledger()
	if q == nil || l.InLegacy() {
		return VolumeStats{}, false, nil
	}
	_, limit, held := q.Held(l.ID)
	if !held {
		return VolumeStats{}, false, nil
	}
	usage, _, err := q.Usage(l.ID)
	if err != nil {
		return VolumeStats{}, true, wrap("reading the volume's project quota", err)
	}
	st, err := rt.deps.FS.Statfs(l.root.path)
	if err != nil {
		return VolumeStats{}, true, failed(fmt.Sprintf("statfs of pool %q", l.pool.name()), err)
	}
	used := usage.UsedBytes
	return VolumeStats{
		UsedBytes: used, AvailableBytes: min(max(0, limit-used), st.AvailableBytes), TotalBytes: limit,
		UsedInodes: usage.UsedInodes, AvailableInodes: st.FreeInodes, TotalInodes: usage.UsedInodes + st.FreeInodes,
	}, true, nil
}
