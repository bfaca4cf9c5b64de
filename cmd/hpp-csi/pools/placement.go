package pools

import (
	"context"
	"errors"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// placement is where a new volume goes: its pool, open, and what decides
// whether a volume found there already is the one asked for.
type placement struct {
	pool  *poolState
	store *dirvol.Store
	// id and key are the volume's and its content source's (""
	// for none); want is Creation.Accept.
	id, key string
	want    func(existing dirvol.Volume) error
}

// place decides the pool of c's volume and answers a retry. It returns
// the volume already there for the caller to accept, refuses a name that
// another pool holds (a different volume, not a retry), and answers for a
// copy into the volume from another node: Busy with its progress while it
// runs, its error once it failed.
func (rt *Runtime) place(ctx context.Context, c Creation) (placement, *dirvol.Volume, error) {
	p, ok := rt.poolNamed(c.Pool)
	if !ok {
		return placement{}, nil, refuse(Invalid, "storage pool %q is not configured on node %s", c.Pool, rt.cfg.NodeID)
	}
	store, err := rt.storeOf(p.own)
	if err != nil {
		return placement{}, nil, wrap("opening pool", err)
	}
	// Names are unique across the node's pools: the same name in another
	// pool is a different volume, not a retry.
	for _, other := range rt.pools {
		if other == p {
			continue
		}
		if s, err := rt.storeOf(other.own); err == nil {
			if _, err := s.Get(ctx, c.ID); err == nil {
				return placement{}, nil, refuse(Exists, "volume %q already exists in storage pool %q, not in the requested pool %q", c.ID, other.name(), p.name())
			}
		}
	}
	pl := placement{pool: p, store: store, id: c.ID, key: c.Source.key(), want: c.Accept}
	// A copy from another node outlives the request that started it: the
	// CO's retry asks here how it is going, or gets how it ended.
	if err := rt.copies.collect(c.ID, p, pl.key); err != nil {
		return placement{}, nil, err
	}
	existing, err := store.Get(ctx, c.ID)
	switch {
	case err == nil:
		return pl, &existing, nil
	case !errors.Is(err, dirvol.ErrNotFound):
		return placement{}, nil, wrap("looking up "+c.What, err)
	}
	return pl, nil, nil
}

// accept answers with existing, a volume already under the new one's id:
// Creation.Accept may refuse it, and one made from another content source
// (or none) is refused.
func (pl placement) accept(existing dirvol.Volume) (Volume, error) {
	if err := pl.want(existing); err != nil {
		return Volume{}, err
	}
	if got := existing.Attributes[contentSourceAttr]; got != pl.key {
		return Volume{}, refuse(Exists, "volume %q already exists with content source %q, not %q", pl.id, got, pl.key)
	}
	return pl.volume(existing), nil
}

// volume is vol as a volume of the placement's pool.
func (pl placement) volume(vol dirvol.Volume) Volume {
	return Volume{pool: pl.pool, root: pl.pool.own, store: pl.store, Volume: vol}
}
