package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
)

// Missing returns the volumes whose meta file is present but whose directory
// is gone: removed behind hpp's back while it was running. Health checks
// report them; Recover (at the next start) forgets them. Sorted by id; Path is
// where the directory should be.
func (s *Store) Missing(ctx context.Context) ([]Volume, error) {
	entries, err := s.fs.ReadDir(s.metaDir())
	if err != nil {
		return nil, fmt.Errorf("list missing volumes: %w", err)
	}
	var out []Volume
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list missing volumes: %w", err)
		}
		id, ok := s.metaID(e.Name())
		if !ok {
			continue
		}
		found, err := s.resolve(id)
		if err != nil {
			continue
		}
		path := found.path
		// Under the id's lock: a Create in this process writes the meta
		// file before renaming the directory in, which is not "missing".
		unlock := s.locks.lock(id)
		_, err = s.fs.Lstat(path)
		unlock()
		if !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		data, err := s.readMeta(filepath.Join(s.metaDir(), e.Name()))
		if err != nil {
			// Deleted meanwhile by a Delete: not missing, just gone.
			continue
		}
		m, err := parseMeta(data)
		if err != nil || m.ID != id {
			continue
		}
		out = append(out, Volume{ID: id, Path: path, CapacityBytes: m.CapacityBytes, Kind: m.Kind,
			Attributes: m.Attributes, Created: m.Created, HasMeta: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
