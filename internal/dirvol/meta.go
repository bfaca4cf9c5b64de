package dirvol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// metaFormatVersion is bumped when the meta file changes incompatibly; an
// older hpp refuses a newer file instead of misreading it.
const metaFormatVersion = 1

const (
	metaExt = ".json"
	// Ids near NAME_MAX leave no room for the extension; their meta file is
	// named by a hash instead. The leading '.' keeps it apart from every
	// valid id, which never starts with '.'.
	hashedMetaPrefix = ".sha256-"
	nameMax          = 255
)

// metaFile is the on-disk record of one volume.
type metaFile struct {
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

func newMeta(id string, spec Spec, now time.Time) metaFile {
	return metaFile{
		FormatVersion: metaFormatVersion,
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

func metaName(id string) string {
	if len(id)+len(metaExt) <= nameMax {
		return id + metaExt
	}
	sum := sha256.Sum256([]byte(id))
	return hashedMetaPrefix + hex.EncodeToString(sum[:]) + metaExt
}

func (s *Store) metaPath(id string) string {
	return filepath.Join(s.metaDir(), metaName(id))
}

// writeMeta writes the meta file of a new volume durably. A crash before it
// returns leaves at worst a temp file in staging or a meta file without a
// volume directory, both of which Recover drops.
//
// The file is synced after the rename, not before: on a journaling
// filesystem that one fsync commits the write and the rename together, and
// the directory sync after it finds nothing left to commit. Syncing before
// the rename costs a second journal commit on every CreateVolume.
func (s *Store) writeMeta(m metaFile) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.stagingDir(), "meta-"+randomSuffix()+metaExt)
	if err := s.fs.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	final := s.metaPath(m.ID)
	if err := s.fs.Rename(tmp, final); err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	if err := s.fs.SyncFile(final); err != nil {
		return err
	}
	return s.fs.SyncDir(s.metaDir())
}

// removeMeta deletes the meta file of id durably; a missing file is fine.
func (s *Store) removeMeta(id string) error {
	err := s.fs.Remove(s.metaPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.fs.SyncDir(s.metaDir())
}

// volume describes the existing directory path of id from its meta file. A
// missing meta file is normal for directories made by the KubeVirt
// provisioner or by hand.
func (s *Store) volume(id, path string) (Volume, error) {
	vol := Volume{ID: id, Path: path}
	p := s.metaPath(id)
	data, err := s.fs.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return vol, nil
	}
	if err != nil {
		return Volume{}, fmt.Errorf("read meta: %w", err)
	}
	m, err := parseMeta(data)
	if err != nil {
		return Volume{}, fmt.Errorf("read meta %s: %w", p, err)
	}
	if m.ID != id {
		return Volume{}, fmt.Errorf("read meta %s: it records id %q, not %q", p, m.ID, id)
	}
	vol.CapacityBytes = m.CapacityBytes
	vol.Kind = m.Kind
	vol.Attributes = m.Attributes
	vol.Created = m.Created
	vol.HasMeta = true
	return vol, nil
}

func parseMeta(data []byte) (metaFile, error) {
	var m metaFile
	if err := json.Unmarshal(data, &m); err != nil {
		return metaFile{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if m.FormatVersion < 1 || m.FormatVersion > metaFormatVersion {
		return metaFile{}, fmt.Errorf("format version %d is not supported by this hpp (1..%d)", m.FormatVersion, metaFormatVersion)
	}
	return m, nil
}

// metaID returns the id a meta file in .hpp-meta belongs to, reading the file
// only when its name is a hash. ok is false for anything that is not a meta
// file (temp files never live there, so this is foreign).
func (s *Store) metaID(name string) (id string, ok bool) {
	if !strings.HasSuffix(name, metaExt) {
		return "", false
	}
	if !strings.HasPrefix(name, hashedMetaPrefix) {
		return strings.TrimSuffix(name, metaExt), true
	}
	data, err := s.fs.ReadFile(filepath.Join(s.metaDir(), name))
	if err != nil {
		return "", false
	}
	m, err := parseMeta(data)
	if err != nil || metaName(m.ID) != name {
		return "", false
	}
	return m.ID, true
}
