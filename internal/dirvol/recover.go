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
	FinishedDeletes   int // trash entries removed
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
	n, err := s.emptyDir(ctx, s.trashDir())
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

// emptyDir removes every entry of dir and returns how many went.
func (s *Store) emptyDir(ctx context.Context, dir string) (int, error) {
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
		if err := s.fs.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if removed > 0 {
		if err := s.fs.SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

func (s *Store) dropOrphanMeta(ctx context.Context) (int, error) {
	entries, err := s.fs.ReadDir(s.metaDir())
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, errors.Join(append(errs, err)...)
		}
		id, ok := s.metaID(e.Name())
		if !ok {
			s.log.Warn("unknown file in meta directory left alone", zap.String("path", filepath.Join(s.metaDir(), e.Name())))
			continue
		}
		found, err := s.resolve(id)
		if err != nil {
			s.log.Warn("meta file for an invalid id left alone", zap.String("name", e.Name()), zap.Error(err))
			continue
		}
		_, err = s.fs.Lstat(found.path)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		if err := s.fs.Remove(filepath.Join(s.metaDir(), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if removed > 0 {
		if err := s.fs.SyncDir(s.metaDir()); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
