package pools

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// RecordSize records a larger size for the volume after checking that the
// pool can offer the growth, and returns the recorded size (unchanged for
// a smaller or equal request). The caller holds the volume's lock.
func (rt *Runtime) RecordSize(ctx context.Context, l Volume, size int64) (int64, error) {
	p, vol := l.pool, l.Volume
	// The volume's own size is already counted in what the pool offers
	// (reserved, or its full limit when enforced), so only the growth
	// must fit. An enforced volume grows from its limit: a size recorded
	// by an earlier call whose limit is not raised yet is not counted.
	base := vol.CapacityBytes
	if limit := rt.EnforcedSize(l); limit > 0 {
		base = limit
	}
	if size <= base && size <= vol.CapacityBytes {
		return vol.CapacityBytes, nil
	}
	// The record is written in the pool's own directory (a legacy volume's
	// is hpp-legacy's to write, so expanding one is refused as not found).
	store, err := rt.storeOf(p.own)
	if err != nil {
		return 0, wrap("opening pool", err)
	}
	if growth := size - base; growth > 0 {
		if err := rt.checkRoom(ctx, p, store, size, growth, fmt.Sprintf("the %d bytes this expansion adds", growth)); err != nil {
			return 0, err
		}
	}
	if vol.CapacityBytes >= size {
		return vol.CapacityBytes, nil
	}
	vol, err = store.Resize(ctx, vol.ID, size)
	if err != nil {
		return 0, wrap("recording the new size", err)
	}
	rt.step("expand.recorded")
	rt.log.Info("volume size recorded", zap.String("volume", vol.ID), zap.String("pool", p.name()),
		zap.Int64("capacityBytes", size), zap.Int64("previousBytes", l.CapacityBytes))
	return vol.CapacityBytes, nil
}

// EnforcedSize is the limit the volume's project quota has now; 0 when it
// has none.
func (rt *Runtime) EnforcedSize(l Volume) int64 {
	q := l.pool.ledger()
	if q == nil || l.InLegacy() {
		return 0
	}
	_, limit, _ := q.Held(l.ID)
	return limit
}

// RaiseLimit sets an enforced volume's limit to size, adopting a volume
// that has no project quota yet; outside enforcing pools it does nothing.
// The caller holds the volume's lock.
func (rt *Runtime) RaiseLimit(ctx context.Context, l Volume, size int64) error {
	q := l.pool.ledger()
	if q == nil {
		return nil
	}
	before := rt.EnforcedSize(l)
	if _, _, held := q.Held(l.ID); held {
		if before == size {
			return nil
		}
		if err := q.Grow(l.ID, size); err != nil {
			return quotaFailed("raising the volume's project quota", err)
		}
	} else if _, err := q.Adopt(ctx, l.Path, l.ID, size); err != nil {
		return quotaFailed("giving the volume a project quota", err)
	}
	rt.log.Info("volume limit raised", zap.String("volume", l.ID), zap.String("pool", l.pool.name()),
		zap.Int64("limitBytes", size), zap.Int64("previousBytes", before))
	return nil
}
