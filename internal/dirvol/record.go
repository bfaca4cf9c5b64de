package dirvol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"go.uber.org/zap"
)

// recordFormatVersion is bumped when the record changes incompatibly; an
// older hpp refuses a newer record instead of misreading it.
const recordFormatVersion = 1

// record is what hpp knows about one volume: one JSON document, kept in the
// volume directory's extended attribute RecordAttr where the pool's
// filesystem allows it, else in the file <root>/.hpp-records/<id> (see the
// package doc, "Records").
type record struct {
	FormatVersion int               `json:"formatVersion"`
	ID            string            `json:"id"`
	Kind          string            `json:"kind"`
	CapacityBytes int64             `json:"capacityBytes"`
	Attributes    map[string]string `json:"attributes,omitempty"`
	Created       time.Time         `json:"created"`
	UID           int               `json:"uid"`
	GID           int               `json:"gid"`
	Mode          string            `json:"mode"` // octal, for people reading it
	// WriteGeneration changes (a new random token) whenever the volume is
	// about to be published read-write (BumpWriteGeneration): a copy of the
	// volume taken at one generation equals the volume while the
	// generation is unchanged and the volume is not published. Empty until
	// the first read-write publish.
	WriteGeneration string `json:"writeGeneration,omitempty"`
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
		Attributes: r.Attributes, Created: r.Created, HasMeta: true, WriteGeneration: r.WriteGeneration}
}

func (r record) encode() ([]byte, error) { return json.Marshal(r) }

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

// attachRecord gives the staged directory tmp its record before it is
// renamed into place. With attribute records nothing is synced here: the
// root's fsync after the rename makes both durable (see the package doc).
// A record file is made durable now, before its directory can appear.
func (s *Store) attachRecord(tmp string, r record) error {
	if !s.attrRecords {
		return s.publishRecord(r)
	}
	data, err := r.encode()
	if err != nil {
		return err
	}
	return s.fs.SetRecordAttr(tmp, data)
}

// undoRecord forgets the record of a create that failed before its
// directory was published (the staged directory takes an attribute record
// with it).
func (s *Store) undoRecord(id string) {
	if !s.attrRecords {
		_, _ = s.dropRecord(id, "")
	}
}

// rewriteRecord replaces the record of the published directory path and
// makes it durable before returning.
func (s *Store) rewriteRecord(path string, r record) error {
	if !s.attrRecords {
		return s.publishRecord(r)
	}
	data, err := r.encode()
	if err != nil {
		return err
	}
	if err := s.fs.SetRecordAttr(path, data); err != nil {
		return err
	}
	// An attribute is part of the directory's inode: its own fsync is
	// what makes a change to it durable.
	return s.fs.SyncDir(path)
}

// readRecord returns the record of the volume id whose directory is path;
// an error matching fs.ErrNotExist when it has none (a directory made by
// the KubeVirt driver or by hand).
func (s *Store) readRecord(id, path string) (record, error) {
	if !s.attrRecords {
		return s.readRecordFile(id)
	}
	data, err := s.fs.RecordAttr(path)
	if err != nil {
		return record{}, err
	}
	r, err := parseRecord(data)
	if err != nil {
		return record{}, fmt.Errorf("read record the attribute %s of %s: %w", RecordAttr, path, err)
	}
	if r.ID != id {
		// The attribute travels with the directory: a copy made as root
		// with its attributes (cp -a, rsync -X, a restore) carries the
		// record of the volume it was copied from. It says nothing about
		// this one, which is adopted like any directory hpp did not make.
		s.log.Warn("volume directory carries the record of another volume; adopted without a record",
			zap.String("id", id), zap.String("recordedID", r.ID), zap.String("path", path))
		return record{}, &fs.PathError{Op: "read record", Path: path, Err: fs.ErrNotExist}
	}
	return r, nil
}

// checkRecord parses the record of id read from where.
func checkRecord(id, where string, data []byte) (record, error) {
	r, err := parseRecord(data)
	if err != nil {
		return record{}, fmt.Errorf("read record %s: %w", where, err)
	}
	if r.ID != id {
		return record{}, fmt.Errorf("read record %s: it records id %q, not %q", where, r.ID, id)
	}
	return r, nil
}

// volume describes the existing directory path of id from its record. A
// missing record is normal for directories made by the KubeVirt driver or
// by hand: they are adopted as they are.
func (s *Store) volume(id, path string) (Volume, error) {
	r, err := s.readRecord(id, path)
	if errors.Is(err, fs.ErrNotExist) {
		return Volume{ID: id, Path: path}, nil
	}
	if err != nil {
		return Volume{}, err
	}
	return r.volume(path), nil
}
