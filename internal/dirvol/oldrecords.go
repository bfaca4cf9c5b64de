package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// Records written by earlier versions of hpp live in .hpp-meta/, in three
// shapes: <id>.json files, the same name as a symbolic link whose target is
// the JSON text (an "inline" record), and .sha256-<hash>.json for ids too
// long for the extension. Recover rewrites each whose volume still exists
// as a record file (durably, before the old one goes), drops the others, and
// removes .hpp-meta/ once it is empty; nothing else reads the old shapes.
const oldRecordExt = ".json"

// migrateOldRecords moves the records of .hpp-meta/ to the records directory.
func (s *Store) migrateOldRecords(ctx context.Context) (int, error) {
	dir := filepath.Join(s.root, OldMetaDir)
	if _, err := s.fs.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	migrated := 0
	n, err := s.sweep(ctx, dir, func(name string) (bool, error) {
		p := filepath.Join(dir, name)
		r, err := s.readOldRecord(p)
		if err != nil {
			s.log.Warn("unreadable file in the old records directory left alone", zap.String("path", p), zap.Error(err))
			return false, nil
		}
		e, err := s.resolve(r.ID)
		if err != nil {
			s.log.Warn("old record of an unusable id left alone", zap.String("path", p), zap.Error(err))
			return false, nil
		}
		if e.fi != nil {
			if _, err := s.readRecord(r.ID, e.path); errors.Is(err, fs.ErrNotExist) {
				if err := s.rewriteRecord(e.path, r); err != nil {
					return false, fmt.Errorf("migrate record %s: %w", p, err)
				}
				migrated++
			}
		}
		return true, s.fs.Remove(p)
	})
	if err != nil {
		return migrated, err
	}
	if n > 0 || migrated > 0 {
		s.log.Info("records of an earlier version migrated", zap.String("root", s.root), zap.Int("migrated", migrated), zap.Int("removed", n))
	}
	if err := s.fs.Remove(dir); err != nil {
		// Something foreign is left in it: say so once, keep going.
		s.log.Warn("old records directory not removed", zap.String("path", dir), zap.Error(err))
		return migrated, nil
	}
	return migrated, s.fs.SyncDir(s.root)
}

// readOldRecord reads an old record: the target of an inline record (a link is
// never followed: its target is the record, not a path) or a file's content.
func (s *Store) readOldRecord(p string) (record, error) {
	if !strings.HasSuffix(p, oldRecordExt) {
		return record{}, fmt.Errorf("not a record (no %s extension)", oldRecordExt)
	}
	var data []byte
	target, err := s.fs.Readlink(p)
	switch {
	case err == nil:
		data = []byte(target)
	case errors.Is(err, syscall.EINVAL):
		if data, err = s.fs.ReadFile(p); err != nil {
			return record{}, err
		}
	default:
		return record{}, err
	}
	return parseRecord(data)
}
