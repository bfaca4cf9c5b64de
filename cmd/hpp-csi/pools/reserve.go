package pools

import (
	"context"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// room is what a new volume holds in its pool before it is made: on a
// pool that enforces sizes, its project ID, with a hard limit equal to
// its capacity (quota.go). The pool's free space is checked, not held:
// dirvol's reservation sum counts the volume once it is made.
type room struct {
	// quota sets the project ID on the staged directory (nil on a pool
	// that does not enforce sizes).
	quota func(dir string) error
	// undo gives the project ID back when the create fails.
	undo func()
}

// reserve refuses a volume of spec's size that the pool cannot hold
// (TooLarge, NoRoom: capacity.go) and, on a pool that enforces sizes,
// takes and limits the volume's project ID; undo gives it back.
func (rt *Runtime) reserve(ctx context.Context, pl placement, id string, spec dirvol.Spec) (room, error) {
	p := pl.pool
	if err := rt.checkFits(ctx, p, pl.store, spec.CapacityBytes); err != nil {
		return room{}, err
	}
	l := p.ledger()
	if l == nil {
		return room{undo: func() {}}, nil
	}
	if spec.CapacityBytes <= 0 {
		what := "capacity_range: required_bytes or limit_bytes must be set"
		if spec.Kind == dirvol.KindEphemeral {
			what = "an inline ephemeral volume has no size; use a generic ephemeral volume (a claim template) or a pool without enforceSize"
		}
		return room{}, refuse(Invalid, "storage pool %q enforces volume sizes (enforceSize): %s", p.name(), what)
	}
	qid, err := l.Assign(id, spec.CapacityBytes)
	if err != nil {
		return room{}, quotaFailed("assigning a project quota", err)
	}
	return room{
		quota: func(dir string) error { return l.Apply(dir, qid) },
		undo: func() {
			if err := l.Release(id); err != nil {
				rt.log.Error("releasing the project ID of a failed create", zap.String("volume", id), zap.Error(err))
			}
		},
	}, nil
}
