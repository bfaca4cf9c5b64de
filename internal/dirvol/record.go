package dirvol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// recordFormatVersion is bumped when the record changes incompatibly; an
// older hpp refuses a newer record instead of misreading it.
const recordFormatVersion = 1

// record is what hpp knows about one volume, kept as a JSON file
// <root>/.hpp-records/<id>. The id needs no escaping or hashing: ids are
// valid directory names, so they are valid file names.
type record struct {
	FormatVersion int               `json:"formatVersion"`
	ID            string            `json:"id"`
	Kind          string            `json:"kind"`
	CapacityBytes int64             `json:"capacityBytes"`
	Attributes    map[string]string `json:"attributes,omitempty"`
	Created       time.Time         `json:"created"`
	UID           int               `json:"uid"`
	GID           int               `json:"gid"`
	Mode          string            `json:"mode"` // octal, for people reading the file
}

func newRecord(id string, spec Spec, now time.Time) record {
	return record{
		FormatVersion: recordFormatVersion,
		ID:            id,
		Kind:          spec.kind(),
		CapacityBytes: spec.CapacityBytes,
		Attributes:    spec.Attributes,
		Created:       now.UTC(),
		UID:           spec.UID,
		GID:           spec.GID,
		Mode:          fmt.Sprintf("%#o", uint32(spec.mode())),
	}
}

func (r record) volume(path string) Volume {
	return Volume{ID: r.ID, Path: path, CapacityBytes: r.CapacityBytes, Kind: r.Kind,
		Attributes: r.Attributes, Created: r.Created, HasMeta: true}
}

func (s *Store) recordPath(id string) string { return filepath.Join(s.recordsDir(), id) }

// publishRecord makes r durable at its final name. The file is written in
// staging under this node's name and renamed into place; it is synced after
// the rename, not before, so that on a journaling filesystem one commit
// covers its data and its name, and the records directory's fsync (shared
// with concurrent creates) finds little left to do. Unsynced file data can
// come back empty after a power loss: the record must be durable before the
// volume directory appears (see the package doc).
func (s *Store) publishRecord(r record) error {
	data, err := json.Marshal(r)
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

// readRecord returns the record of id; an error matching fs.ErrNotExist
// when there is none (a directory made by the KubeVirt driver or by hand).
func (s *Store) readRecord(id string) (record, error) {
	p := s.recordPath(id)
	data, err := s.fs.ReadFile(p)
	if err != nil {
		return record{}, err
	}
	r, err := parseRecord(data)
	if err != nil {
		return record{}, fmt.Errorf("read record %s: %w", p, err)
	}
	if r.ID != id {
		return record{}, fmt.Errorf("read record %s: it records id %q, not %q", p, r.ID, id)
	}
	return r, nil
}

func parseRecord(data []byte) (record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if r.FormatVersion < 1 || r.FormatVersion > recordFormatVersion {
		return record{}, fmt.Errorf("format version %d is not supported by this hpp (1..%d)", r.FormatVersion, recordFormatVersion)
	}
	return r, nil
}

// volume describes the existing directory path of id from its record. A
// missing record is normal for directories made by the KubeVirt driver or
// by hand: they are adopted as they are.
func (s *Store) volume(id, path string) (Volume, error) {
	r, err := s.readRecord(id)
	if errors.Is(err, fs.ErrNotExist) {
		return Volume{ID: id, Path: path}, nil
	}
	if err != nil {
		return Volume{}, err
	}
	return r.volume(path), nil
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
