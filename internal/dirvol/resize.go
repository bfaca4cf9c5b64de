package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Resize records a new requested size for the volume of id: hostpath
// volumes have no quota, so expansion is bookkeeping only (the record and
// what reservation-aware capacity counts). It is idempotent and atomic: an
// attribute record is replaced in one setxattr, a record file is rewritten
// in staging and renamed over the old one, so a crash leaves the old size
// or the new one, never a torn record; it is durable when Resize returns. A directory
// without a record (made by the KubeVirt driver or by hand) gets one, with
// its owner and mode left unknown as they were. ErrNotFound (wrapped) when
// the directory is missing.
func (s *Store) Resize(ctx context.Context, id string, capacityBytes int64) (Volume, error) {
	if err := pool.ValidateID(id); err != nil {
		return Volume{}, err
	}
	if capacityBytes < 0 {
		return Volume{}, fieldErr("capacityBytes", "%d is negative", capacityBytes)
	}
	what := fmt.Sprintf("resize volume %q", id)
	e, _, unlock, err := s.lockExisting(ctx, id, what)
	if err != nil {
		return Volume{}, err
	}
	defer unlock()
	r, err := s.readRecord(id, e.path)
	if errors.Is(err, fs.ErrNotExist) {
		r = newRecord(id, Spec{Ownership: Ownership{UID: -1, GID: -1}}, time.Now())
		r.Mode = "" // not made by hpp: unknown, not DefaultMode
	} else if err != nil {
		return Volume{}, fmt.Errorf("%s: %w", what, err)
	}
	if r.CapacityBytes == capacityBytes {
		return r.volume(e.path), nil
	}
	r.CapacityBytes = capacityBytes
	if err := s.rewriteRecord(e.path, r); err != nil {
		return Volume{}, fmt.Errorf("%s: write record: %w", what, err)
	}
	s.index.put(id, capacityBytes, r.Kind)
	return r.volume(e.path), nil
}
