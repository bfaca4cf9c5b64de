package pools

import (
	"context"
	"fmt"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// poolCapacity is what a pool can offer to new volumes right now.
type poolCapacity struct {
	stats capacity.Stats
	// offered is free space minus headroom and, when reservation-aware,
	// minus what live volumes requested but have not written yet.
	offered  int64
	reserved int64
}

// Offered is what the named pool can give new volumes now, which is also
// the largest volume that fits. A pool that is not usable (not mounted,
// not opened yet) offers nothing: that is an answer, not an error a
// capacity controller should retry.
func (rt *Runtime) Offered(ctx context.Context, pool string) (int64, error) {
	p, ok := rt.poolNamed(pool)
	if !ok {
		return 0, nil
	}
	store, err := rt.storeOf(p.own)
	if err != nil {
		return 0, nil //nolint:nilerr // zero capacity is the answer
	}
	c, err := rt.poolCapacity(ctx, p, store)
	if err != nil {
		return 0, err
	}
	return c.offered, nil
}

// Reserved is what the named pool's own volumes requested but have not
// written yet, as its store keeps the sum (0 for a pool not open).
func (rt *Runtime) Reserved(pool string) int64 {
	p, ok := rt.poolNamed(pool)
	if !ok {
		return 0
	}
	store, err := rt.storeOf(p.own)
	if err != nil {
		return 0
	}
	return store.Reserved()
}

func (rt *Runtime) poolCapacity(ctx context.Context, p *poolState, store *dirvol.Store) (poolCapacity, error) {
	st, err := rt.deps.FS.Statfs(p.cfg.Path)
	if err != nil {
		return poolCapacity{}, fmt.Errorf("statfs of pool %q at %s: %w", p.name(), p.cfg.Path, err)
	}
	c := poolCapacity{stats: st, offered: capacity.Offered(st, p.headroom)}
	switch {
	case p.cfg.EnforceSize:
		// Every enforced volume may still write up to its limit: that is
		// taken, whatever the flag says.
		committed, err := p.committed()
		if err != nil {
			return poolCapacity{}, fmt.Errorf("project quota usage of pool %q: %w", p.name(), err)
		}
		c.reserved = committed
	case rt.cfg.ReservationAware && store != nil:
		// The store keeps the sum up to date (creates, deletes and the
		// usage measured by NodeGetVolumeStats), so this costs the same
		// with 10,000 volumes as with none.
		c.reserved = store.Reserved()
	default:
		return c, nil
	}
	c.reserved += rt.legacyReserved(p)
	c.offered = max(0, c.offered-c.reserved)
	return c, nil
}

// checkFits refuses a volume the pool cannot hold: TooLarge when it could
// never fit (larger than the filesystem), NoRoom when it does not fit now.
func (rt *Runtime) checkFits(ctx context.Context, p *poolState, store *dirvol.Store, size int64) error {
	if size == 0 {
		return nil
	}
	return rt.checkRoom(ctx, p, store, size, size, fmt.Sprintf("the requested %d bytes", size))
}

// checkRoom refuses a volume of size bytes whose extra bytes (all of them
// for a new volume, the growth for an expansion) the pool cannot offer;
// need describes them in the message.
func (rt *Runtime) checkRoom(ctx context.Context, p *poolState, store *dirvol.Store, size, extra int64, need string) error {
	c, err := rt.poolCapacity(ctx, p, store)
	if err != nil {
		return wrap("checking pool capacity", err)
	}
	if size > c.stats.TotalBytes {
		return refuse(TooLarge, "requested %d bytes exceeds the total size %d bytes of storage pool %q on node %s",
			size, c.stats.TotalBytes, p.name(), rt.cfg.NodeID)
	}
	if extra > c.offered && rt.evictForRoom(p, extra-c.offered) {
		// The clone cache gave back room: count again.
		if c, err = rt.poolCapacity(ctx, p, store); err != nil {
			return wrap("checking pool capacity", err)
		}
	}
	if extra > c.offered {
		return refuse(NoRoom, "storage pool %q on node %s can offer %d bytes now (free %d, headroom %d, reserved by volumes %d), less than %s",
			p.name(), rt.cfg.NodeID, c.offered, c.stats.AvailableBytes, p.headroom.Reserved(c.stats.TotalBytes), c.reserved, need)
	}
	return nil
}
