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
	if err := ctx.Err(); err != nil {
		return Volume{}, fmt.Errorf("write generation of volume %q: %w", id, err)
	}
	unlock, err := s.lockID(id)
	if err != nil {
		return Volume{}, fmt.Errorf("write generation of volume %q: %w", id, err)
	}
	defer unlock()
	e, err := s.resolve(id)
	if err != nil {
		return Volume{}, err
	}
	if _, err := s.existing(id, e); err != nil {
		return Volume{}, fmt.Errorf("write generation of volume %q: %w", id, err)
	}
	r, err := s.readRecord(id, e.path)
	if err != nil {
		return Volume{}, fmt.Errorf("write generation of volume %q: %w", id, err)
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Volume{}, err
	}
	r.WriteGeneration = hex.EncodeToString(b[:])
	if err := s.rewriteRecord(e.path, r); err != nil {
		return Volume{}, fmt.Errorf("write generation of volume %q: write record: %w", id, err)
	}
	return r.volume(e.path), nil
}
