package dirvol

import (
	"context"
	"fmt"
	"sort"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Get returns the volume of id; ErrNotFound (wrapped) if its directory is
// missing.
func (s *Store) Get(ctx context.Context, id string) (Volume, error) {
	e, err := s.resolve(id)
	if err != nil {
		return Volume{}, err
	}
	if err := ctx.Err(); err != nil {
		return Volume{}, fmt.Errorf("get volume %q: %w", id, err)
	}
	vol, err := s.existing(id, e)
	if err != nil {
		return Volume{}, fmt.Errorf("get volume %q: %w", id, err)
	}
	return vol, nil
}

// List returns the volumes sorted by id: the directories in root whose names
// are valid ids. Private areas, lost+found, files and symlinks are not
// volumes.
func (s *Store) List(ctx context.Context) ([]Volume, error) {
	entries, err := s.fs.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	vols := []Volume{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		if !e.IsDir() || pool.ValidateID(e.Name()) != nil || s.notVolumes[e.Name()] {
			continue
		}
		found, err := s.resolve(e.Name())
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		if found.fi == nil {
			continue // deleted since ReadDir
		}
		vol, err := s.volume(e.Name(), found.path)
		if err != nil {
			return nil, fmt.Errorf("list volumes: %s: %w", e.Name(), err)
		}
		vols = append(vols, vol)
	}
	sort.Slice(vols, func(i, j int) bool { return vols[i].ID < vols[j].ID })
	return vols, nil
}

// Missing returns the volumes whose directory is gone although this Store
// made or found them and never deleted them: removed behind hpp's back.
// Health checks report them; Recover (at the next start) forgets them.
// Creates in flight are not in the index yet, so they never show here.
// Sorted by id; Path is where the directory should be, and only the id,
// capacity and kind are known (the record left with the directory, or is
// left behind by it: either way the index is what remembers).
func (s *Store) Missing(ctx context.Context) ([]Volume, error) {
	var out []Volume
	for _, v := range s.index.volumes(s.root) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list missing volumes: %w", err)
		}
		found, err := s.resolve(v.ID)
		if err != nil || found.fi != nil {
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
