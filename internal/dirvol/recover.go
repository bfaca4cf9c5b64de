package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// RecoverReport counts what Recover cleaned up.
type RecoverReport struct {
	// FinishedDeletes counts trash entries: removed, or queued for the
	// background purge when the Store purges in the background.
	FinishedDeletes   int
	RemovedStaging    int // half-built volumes and temp records removed
	RemovedOrphanMeta int // records whose volume directory is missing
	MigratedRecords   int // records of earlier versions rewritten in the current form
}

// Recover brings the root back to a consistent state after a crash and
// builds the in-memory index: it rewrites records of earlier versions,
// drops staging leftovers of creates that never got renamed into place,
// drops records whose directory is missing, and finishes half-done deletes
// (empties trash). Call it once at start, before serving: it assumes no
// Create or Delete of this process runs at the same time. On a shared pool
// it touches only this node's staging and trash entries, and removes an
// orphan record only under the id's cross-node lock, so another node's
// create in flight keeps its record. It continues past individual failures
// and returns them all.
//
// With PurgeInBackground, trash is handed to the purge queue instead of
// being emptied here, so Recover returns as soon as the small things are
// done even when a crash left hundreds of GiB of deleted VM disks in trash.
func (s *Store) Recover(ctx context.Context) (RecoverReport, error) {
	var rep RecoverReport
	var errs []error
	n, err := s.migrateOwnedOldRecords(ctx)
	rep.MigratedRecords = n
	errs = append(errs, err)
	n, err = s.emptyStaging(ctx)
	rep.RemovedStaging = n
	errs = append(errs, err)
	dropped, migrated, err := s.indexRecords(ctx)
	rep.RemovedOrphanMeta = dropped
	rep.MigratedRecords += migrated
	errs = append(errs, err)
	n, err = s.emptyTrash(ctx)
	rep.FinishedDeletes = n
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("recover %s: %w", s.root, err)
	}
	s.log.Info("volume root recovered", zap.String("root", s.root),
		zap.Int("finishedDeletes", rep.FinishedDeletes),
		zap.Int("removedStaging", rep.RemovedStaging),
		zap.Int("removedOrphanMeta", rep.RemovedOrphanMeta),
		zap.Int("migratedRecords", rep.MigratedRecords),
		zap.Bool("purgeInBackground", s.purgeInBackground))
	return rep, nil
}

// emptyStaging removes this node's staging entries: no call is running, so
// each is a create that never finished.
func (s *Store) emptyStaging(ctx context.Context) (int, error) {
	dir := s.stagingDir()
	return s.sweep(ctx, dir, func(name string) (bool, error) {
		if !s.ours(name) {
			return false, nil
		}
		return true, s.fs.RemoveAll(filepath.Join(dir, name))
	})
}

// emptyTrash removes this node's trash entries, or queues them for the
// background purge.
func (s *Store) emptyTrash(ctx context.Context) (int, error) {
	dir := s.trashDir()
	return s.sweep(ctx, dir, func(name string) (bool, error) {
		if !s.ours(name) {
			return false, nil
		}
		t := trashEntry{id: "(found at start)", dir: filepath.Join(dir, name)}
		if s.purgeInBackground {
			s.purges.add(t)
			return true, nil
		}
		return true, s.fs.RemoveAll(t.dir)
	})
}

// indexRecords builds the index from the records and tidies the records
// directory: a record file whose directory is missing is dropped (a create
// that never published its directory, or a delete that did not get to move
// the record away). With attribute records, a record file left by an
// earlier version moves into its directory's attribute first.
func (s *Store) indexRecords(ctx context.Context) (dropped, migrated int, err error) {
	dir := s.recordsDir()
	dropped, err = s.sweep(ctx, dir, func(id string) (bool, error) {
		if pool.ValidateID(id) != nil {
			s.log.Warn("unknown file in the records directory left alone", zap.String("path", filepath.Join(dir, id)))
			return false, nil
		}
		unlock, err := s.lockID(id)
		if err != nil {
			return false, err
		}
		defer unlock()
		e, err := s.resolve(id)
		if err != nil {
			s.log.Warn("record of an unusable id left alone", zap.String("id", id), zap.Error(err))
			return false, nil
		}
		if e.fi == nil {
			if s.guest {
				return false, nil // the owner's, maybe in flight (guest.go)
			}
			_, err := s.dropRecord(id, "")
			return err == nil, err
		}
		r, err := s.readRecordFile(id)
		if err != nil {
			// Get reports it for this volume; the pool stays usable.
			s.log.Warn("unreadable record; its volume counts no reservation", zap.String("id", id), zap.Error(err))
			return false, nil
		}
		if !s.attrRecords {
			s.index.put(id, r.CapacityBytes, r.Kind)
			return false, nil
		}
		if s.guest {
			return false, nil // the owner moves its own record files (guest.go)
		}
		// Durable in the attribute before the file goes: a crash in
		// between finds both and does this again.
		if err := s.rewriteRecord(e.path, r); err != nil {
			return false, fmt.Errorf("move record of %q into its directory: %w", id, err)
		}
		migrated++
		return false, s.fs.Remove(s.recordPath(id))
	})
	if migrated > 0 {
		errs := []error{err, s.fs.SyncDir(dir)}
		err = errors.Join(errs...)
	}
	if s.attrRecords {
		err = errors.Join(err, s.indexAttrRecords(ctx))
	}
	return dropped, migrated, err
}

// indexAttrRecords puts every volume with an attribute record in the index;
// directories without one were not made by hpp and reserve nothing.
func (s *Store) indexAttrRecords(ctx context.Context) error {
	entries, err := s.fs.ReadDir(s.root)
	if err != nil {
		return err
	}
	for _, de := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := de.Name()
		if !de.IsDir() || pool.ValidateID(id) != nil || s.notVolumes[id] {
			continue
		}
		r, err := s.readRecord(id, filepath.Join(s.root, id))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.log.Warn("unreadable record; its volume counts no reservation", zap.String("id", id), zap.Error(err))
			continue
		}
		s.index.put(id, r.CapacityBytes, r.Kind)
	}
	return nil
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
