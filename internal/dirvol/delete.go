package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"go.uber.org/zap"
)

// maxTrashIDLen keeps "<id>-<random>" within one directory entry.
const maxTrashIDLen = nameMax - 1 - 16

// Delete removes the volume of id and its meta file. It is idempotent (a
// missing volume is success, and a stale meta file is dropped) and
// crash-safe: the directory is first renamed into trash, which takes it out
// of the pool in one step, and only then removed; a crash in between leaves
// trash that Recover empties.
func (s *Store) Delete(ctx context.Context, id string) error {
	path, err := s.resolve(id)
	if err != nil {
		return err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete volume %q: %w", id, err)
	}
	if err := s.delete(id, path); err != nil {
		return fmt.Errorf("delete volume %q: %w", id, err)
	}
	return nil
}

func (s *Store) delete(id, path string) error {
	_, err := s.fs.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.removeMeta(id); err != nil {
			return fmt.Errorf("remove stale meta: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("check volume: %w", err)
	}
	trashName := id
	if len(trashName) > maxTrashIDLen {
		trashName = trashName[:maxTrashIDLen]
	}
	trash := filepath.Join(s.trashDir(), trashName+"-"+randomSuffix())
	if err := s.fs.Rename(path, trash); err != nil {
		return fmt.Errorf("move to trash: %w", err)
	}
	// The rename must be durable before the meta file goes: otherwise a power
	// loss could bring back a directory whose meta file is gone. Only the
	// root is synced: whether the trash entry survives a power loss does not
	// matter (the volume is out of the pool either way), and a meta file
	// that comes back without its directory is an orphan that Recover drops
	// at the next start. Each fsync here is about a millisecond on a disk.
	if err := s.fs.SyncDir(s.root); err != nil {
		return fmt.Errorf("sync root: %w", err)
	}
	if err := s.fs.Remove(s.metaPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove meta: %w", err)
	}
	if s.purgeInBackground {
		go s.purge(id, trash)
	} else if err := s.fs.RemoveAll(trash); err != nil {
		return fmt.Errorf("remove trash entry (Recover finishes it): %w", err)
	}
	s.log.Debug("volume directory deleted", zap.String("id", id), zap.String("path", path))
	return nil
}

// purge empties one trash entry after Delete returned; a failure is logged
// and left for Recover at the next start.
func (s *Store) purge(id, trash string) {
	if err := s.fs.RemoveAll(trash); err != nil {
		s.log.Error("purging deleted volume failed; the next start retries", zap.String("id", id), zap.String("trash", trash), zap.Error(err))
	}
}
