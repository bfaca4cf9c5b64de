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
		if !e.IsDir() || pool.ValidateID(e.Name()) != nil {
			continue
		}
		found, err := s.resolve(e.Name())
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
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
