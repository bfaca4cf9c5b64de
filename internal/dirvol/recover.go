package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"go.uber.org/zap"
)

// RecoverReport counts what Recover cleaned up.
type RecoverReport struct {
	FinishedDeletes   int // trash entries removed (queued for the purge with PurgeInBackground)
	RemovedStaging    int // half-built volumes and temp meta files removed
	RemovedOrphanMeta int // meta files whose volume directory is missing
}

// Recover brings the root back to a consistent state after a crash: it
// finishes half-done deletes (empties trash), drops staging leftovers of
// creates that never got renamed into place, and drops meta files whose
// directory is missing. Call it once at start, before serving: it assumes no
// Create or Delete runs at the same time. It continues past individual
// failures and returns them all.
func (s *Store) Recover(ctx context.Context) (RecoverReport, error) {
	var rep RecoverReport
	var errs []error
	n, err := s.recoverTrash(ctx)
	rep.FinishedDeletes = n
	errs = append(errs, err)
	n, err = s.emptyDir(ctx, s.stagingDir())
	rep.RemovedStaging = n
	errs = append(errs, err)
	n, err = s.dropOrphanMeta(ctx)
	rep.RemovedOrphanMeta = n
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("recover %s: %w", s.root, err)
	}
	s.log.Info("volume root recovered", zap.String("root", s.root),
		zap.Int("finishedDeletes", rep.FinishedDeletes),
		zap.Int("removedStaging", rep.RemovedStaging),
		zap.Int("removedOrphanMeta", rep.RemovedOrphanMeta))
	return rep, nil
}

// recoverTrash finishes the deletes a crash interrupted. With
// PurgeInBackground their entries join the purge queue instead of being
// removed here, so that a restart after deleting large VM disks serves at
// once; the count is then of queued entries.
func (s *Store) recoverTrash(ctx context.Context) (int, error) {
	if !s.purgeInBackground {
		return s.emptyDir(ctx, s.trashDir())
	}
	entries, err := s.fs.ReadDir(s.trashDir())
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		s.purges.add(trashEntry{id: e.Name(), dir: filepath.Join(s.trashDir(), e.Name())})
	}
	return len(entries), nil
}

// emptyDir removes every entry of dir and returns how many went.
func (s *Store) emptyDir(ctx context.Context, dir string) (int, error) {
	return s.sweep(ctx, dir, func(name string) (bool, error) {
		return true, s.fs.RemoveAll(filepath.Join(dir, name))
	})
}

// dropOrphanMeta removes the meta files whose volume directory is missing.
func (s *Store) dropOrphanMeta(ctx context.Context) (int, error) {
	return s.sweep(ctx, s.metaDir(), func(name string) (bool, error) {
		id, ok := s.metaID(name)
		if !ok {
			s.log.Warn("unknown file in meta directory left alone", zap.String("path", filepath.Join(s.metaDir(), name)))
			return false, nil
		}
		found, err := s.resolve(id)
		if err != nil {
			s.log.Warn("meta file for an invalid id left alone", zap.String("name", name), zap.Error(err))
			return false, nil
		}
		_, err = s.fs.Lstat(found.path)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := s.fs.Remove(filepath.Join(s.metaDir(), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		return true, nil
	})
}

// sweep calls drop on every entry of dir, stopping when ctx ends, and
// returns how many entries drop removed and every error; dir is synced when
// any went.
func (s *Store) sweep(ctx context.Context, dir string, drop func(name string) (removed bool, err error)) (int, error) {
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, errors.Join(append(errs, err)...)
		}
		gone, err := drop(e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if gone {
			removed++
		}
	}
	if removed > 0 {
		if err := s.fs.SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
