package dirvol

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Delete removes the volume of id and its record. It is idempotent (a
// missing volume is success, and a stale record is dropped) and crash-safe:
// the directory is first renamed into trash, which takes it out of the pool
// in one step, the root is synced (shared with concurrent calls), and only
// then does the record follow and the data go; a crash in between leaves
// trash, which Recover empties, and at most an orphan record, which it drops.
// The record leaves after the directory's removal is durable, never before:
// a directory that came back without its record would be adopted as one hpp
// did not make.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := pool.ValidateID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete volume %q: %w", id, err)
	}
	if baselineNoDurability {
		return s.baselineDelete(id)
	}
	unlock, err := s.lockID(id)
	if err != nil {
		return fmt.Errorf("delete volume %q: %w", id, err)
	}
	defer unlock()
	e, err := s.resolve(id)
	if err != nil {
		return err
	}
	if err := s.delete(id, e); err != nil {
		return fmt.Errorf("delete volume %q: %w", id, err)
	}
	return nil
}

func (s *Store) delete(id string, e entry) error {
	if e.fi == nil {
		s.index.remove(id)
		if _, err := s.detachRecord(id, ""); err != nil {
			return fmt.Errorf("remove stale record: %w", err)
		}
		return nil
	}
	trash := filepath.Join(s.trashDir(), s.tag+"."+randomSuffix())
	if err := s.fs.Rename(e.path, trash); err != nil {
		return fmt.Errorf("move to trash: %w", err)
	}
	s.index.remove(id)
	// The directory's rename must be durable before Delete returns, or a
	// power loss could bring the volume back; trash entries need no fsync
	// (Recover empties whatever trash holds).
	if err := s.rootSync.sync(); err != nil {
		return fmt.Errorf("sync root: %w", err)
	}
	rec, err := s.detachRecord(id, trash)
	if err != nil {
		return fmt.Errorf("move record to trash: %w", err)
	}
	t := trashEntry{id: id, dir: trash, record: rec}
	if s.purgeInBackground {
		s.purges.add(t)
	} else if err := s.removeTrash(t); err != nil {
		return fmt.Errorf("remove trash entry (Recover finishes it): %w", err)
	}
	s.log.Debug("volume directory deleted", zap.String("id", id), zap.String("path", e.path))
	return nil
}
