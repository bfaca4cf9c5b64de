package pools

import (
	"context"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Creation is one volume to make: by CreateVolume (persistent, maybe from
// a content source) or by the publish of an inline ephemeral volume. Both
// go through Create, so they refuse, create, label and undo the same way.
type Creation struct {
	// Pool is the pool's name, as the request's storagePool rules chose it.
	Pool string
	ID   string
	Spec dirvol.Spec
	// Source, when set, is copied into the new volume before it is
	// published.
	Source *Source
	// Accept says whether a volume already there under ID is the one asked
	// for (a retry) or must be refused; it returns the caller's error. A
	// volume made from another source (or none) is refused after it.
	Accept func(existing dirvol.Volume) error
	// What names the volume in errors and logs ("volume", "ephemeral volume").
	What string
	// Claim is the PVC the volume is made for, when the request says
	// (csi-provisioner's --extra-create-metadata); a source on another node
	// is served only for a named claim (remote.go).
	Claim ClaimRef
}

// Create makes the volume, or returns the one already there when Accept
// takes it. The caller holds the id's lock (Lock). A create is four
// phases, a file each; no phase calls into another phase's file, so the
// route reads top to bottom here:
//
//   - place (placement.go): the pool the volume goes in, and what a retry
//     finds there (the volume, or the copy into it from another node);
//   - resolve (source.go): what fills it: nothing, a snapshot or volume of
//     this node, or a source on another node;
//   - reserve (reserve.go): its room in the pool and its project quota ID;
//   - make (make.go): staged, filled and committed (commit.go) now, or, from
//     another node, by a copy job that outlives the request (makeremote.go).
//
// A volume that cannot be labelled for SELinux is removed again, so the
// CO's retry starts clean; if that removal fails too, both errors are
// returned.
func (rt *Runtime) Create(ctx context.Context, c Creation) (Volume, error) {
	pl, existing, err := rt.place(ctx, c)
	if err != nil {
		return Volume{}, err
	}
	if existing != nil {
		return rt.handOver(ctx, pl, *existing)
	}
	// Only a volume still to be made needs its source: a retry of a
	// finished clone was accepted above, even if the source is gone since.
	src, spec, err := rt.resolve(ctx, c)
	if err != nil {
		return Volume{}, err
	}
	defer src.release()
	c.Spec = spec
	r, err := rt.reserve(ctx, pl, c.ID, c.Spec)
	if err != nil {
		return Volume{}, err
	}
	vol, made, err := rt.make(ctx, pl, c, src, r)
	if err != nil {
		return Volume{}, err
	}
	if !made {
		// Made meanwhile: by another process on a shared pool, or by the
		// copy job that fetched it from another node.
		return rt.handOver(ctx, pl, vol)
	}
	return pl.volume(vol), nil
}

// handOver answers with existing, a volume already under the new one's id
// (a retry, or a copy job's), when the placement accepts it; a copy from
// another node is collected then (uncollected.go).
func (rt *Runtime) handOver(ctx context.Context, pl placement, existing dirvol.Volume) (Volume, error) {
	vol, err := pl.accept(existing)
	if err != nil {
		return Volume{}, err
	}
	return rt.collect(ctx, vol)
}
