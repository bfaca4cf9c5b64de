package dirvol

import (
	"context"
	"fmt"
	"maps"
)

// SetAttribute sets the attribute key of the volume id's record to value,
// or removes it when value is "", durably and atomically as
// BumpWriteGeneration does: the record is one document, rewritten whole.
// Setting what is already there writes nothing, so a repeated call (a
// retry after a crash) is harmless. A directory without a record is
// refused (ErrNotFound wraps a missing directory); removing a key from it
// is a no-op, since it holds no attribute.
func (s *Store) SetAttribute(ctx context.Context, id, key, value string) (Volume, error) {
	what := fmt.Sprintf("attribute %s of volume %q", key, id)
	e, vol, unlock, err := s.lockExisting(ctx, id, what)
	if err != nil {
		return Volume{}, err
	}
	defer unlock()
	if !vol.HasMeta && value == "" {
		return vol, nil
	}
	r, err := s.readRecord(id, e.path)
	if err != nil {
		return Volume{}, fmt.Errorf("%s: %w", what, err)
	}
	if got, ok := r.Attributes[key]; got == value && (ok || value == "") {
		return r.volume(e.path), nil
	}
	// A copy: the record read may share its map with a cached one.
	r.Attributes = maps.Clone(r.Attributes)
	if value == "" {
		delete(r.Attributes, key)
	} else {
		if r.Attributes == nil {
			r.Attributes = map[string]string{}
		}
		r.Attributes[key] = value
	}
	if err := s.rewriteRecord(e.path, r); err != nil {
		return Volume{}, fmt.Errorf("%s: write record: %w", what, err)
	}
	return r.volume(e.path), nil
}
