package dirvol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// BumpWriteGeneration gives the volume of id a new write generation (a
// random token) in its record, durably, before the caller publishes it
// read-write: whoever kept a copy of the volume at the old generation
// (a node's clone cache) then knows the copy may be stale. Atomic as
// Resize is. A directory without a record is refused (ErrNotFound wraps a
// missing directory): such volumes have no generation, and callers treat
// them as never cacheable.
func (s *Store) BumpWriteGeneration(ctx context.Context, id string) (Volume, error) {
	what := fmt.Sprintf("write generation of volume %q", id)
	e, _, unlock, err := s.lockExisting(ctx, id, what)
	if err != nil {
		return Volume{}, err
	}
	defer unlock()
	r, err := s.readRecord(id, e.path)
	if err != nil {
		return Volume{}, fmt.Errorf("%s: %w", what, err)
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Volume{}, err
	}
	r.WriteGeneration = hex.EncodeToString(b[:])
	if err := s.rewriteRecord(e.path, r); err != nil {
		return Volume{}, fmt.Errorf("%s: write record: %w", what, err)
	}
	return r.volume(e.path), nil
}
