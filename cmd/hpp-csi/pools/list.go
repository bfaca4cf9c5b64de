package pools

import "context"

// Volumes lists every usable pool's own volumes in (pool order, id) order.
// Legacy directories are not listed: they also hold PVs not migrated yet,
// which are not CSI volumes.
func (rt *Runtime) Volumes(ctx context.Context) ([]Volume, error) {
	var out []Volume
	for _, p := range rt.usable() {
		vols, err := p.store.List(ctx)
		if err != nil {
			return nil, wrap("listing volumes of pool "+p.name(), err)
		}
		for _, v := range vols {
			out = append(out, Volume{pool: p.poolState, root: p.own, store: p.store, Volume: v})
		}
	}
	return out, nil
}
