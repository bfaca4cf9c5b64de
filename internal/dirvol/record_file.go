package dirvol

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// Record files: the records of a pool whose filesystem cannot keep them in
// attributes (see the package doc, "Records").

func (s *Store) recordPath(id string) string { return filepath.Join(s.recordsDir(), id) }

// publishRecord makes r durable at its final name. The file is written in
// staging under this node's name and renamed into place; it is synced after
// the rename, not before, so that on a journaling filesystem one commit
// covers its data and its name, and the records directory's fsync (shared
// with concurrent creates) finds little left to do. Unsynced file data can
// come back empty after a power loss: the record must be durable before the
// volume directory appears (see the package doc).
func (s *Store) publishRecord(r record) error {
	data, err := r.encode()
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.stagingDir(), s.tag+".rec-"+randomSuffix())
	if err := s.fs.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	final := s.recordPath(r.ID)
	if err := s.fs.Rename(tmp, final); err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	if err := s.fs.SyncFile(final); err != nil {
		return err
	}
	return s.recordsSync.sync()
}

// readRecordFile reads the record file of id; an error matching
// fs.ErrNotExist when there is none.
func (s *Store) readRecordFile(id string) (record, error) {
	p := s.recordPath(id)
	data, err := s.fs.ReadFile(p)
	if err != nil {
		return record{}, err
	}
	return checkRecord(id, p, data)
}

// detachRecord takes the record of id away once its directory's removal
// is durable: a record file goes where dropRecord puts it; an attribute
// record left with its directory already.
func (s *Store) detachRecord(id, trash string) (string, error) {
	if s.attrRecords {
		return "", nil
	}
	return s.dropRecord(id, trash)
}

// dropRecord takes the record of id out of the records directory: into
// trash beside the volume's data (trash is that entry's path), or, for a
// stale record with no directory (trash ""), by removing it. It is called
// once the directory's removal is durable, and syncs nothing: a record that
// comes back after a power loss has no directory, and Recover drops it. A
// rename rather than an unlink keeps block freeing (a synchronous discard on
// a filesystem mounted with -o discard) off the caller's path; the purge
// frees it. It returns where the record went ("" when removed or absent).
func (s *Store) dropRecord(id, trash string) (string, error) {
	p := s.recordPath(id)
	var err error
	dst := ""
	if trash != "" {
		dst = trash + recordTrashExt
		err = s.fs.Rename(p, dst)
	} else {
		err = s.fs.Remove(p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return dst, nil
}

// recordTrashExt names a record in trash beside its volume's data.
const recordTrashExt = ".rec"
