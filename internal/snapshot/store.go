// Package snapshot keeps point-in-time copies of volume directories in a
// pool's snapshot area (the pool's snapshotPath), in the KubeVirt driver's
// layout so that snapshots it took stay usable after hpp replaces it:
//
//	<area>/<snapshot id>/data/             the copy of the volume's contents
//	<area>/<snapshot id>/<source volume>/  empty: names the source volume
//	<area>/<snapshot id>/.hpp-snapshot     hpp's record (size, time); absent
//	                                       in snapshots the KubeVirt driver took
//
// A snapshot is built under a temporary name in <area>/.hpp-staging, made
// durable (syncfs) and renamed into place in one step, so a copy that stops
// halfway (a crash, a full disk) leaves only staging, which Recover
// removes: nothing that looks like a snapshot. Delete renames into
// <area>/.hpp-trash first. Snapshot ids are volume-id shaped
// (pool.ValidateID), so none names a hidden entry.
package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// Names inside the snapshot area and inside one snapshot.
const (
	StagingDir = ".hpp-staging"
	TrashDir   = ".hpp-trash"
	DataDir    = "data"
	RecordFile = ".hpp-snapshot"
)

// ErrNotFound is returned (wrapped) for a snapshot that does not exist.
var ErrNotFound = errors.New("snapshot not found")

// ErrOtherSource is returned (wrapped) by Create when the id exists with
// another source volume.
var ErrOtherSource = errors.New("snapshot exists with another source volume")

// Snapshot is one snapshot in the area.
type Snapshot struct {
	ID, SourceVolumeID string
	// Data is the directory holding the copy.
	Data string
	// SizeBytes is the size a volume restored from it needs: the source
	// volume's recorded size, else the bytes copied; 0 when unknown (a
	// snapshot of the KubeVirt driver).
	SizeBytes int64
	Created   time.Time
}

type record struct {
	SourceVolumeID string    `json:"sourceVolumeId"`
	SizeBytes      int64     `json:"sizeBytes"`
	Created        time.Time `json:"created"`
	Copy           string    `json:"copy"` // reflink or copy: how the data was made
	Reflinked      int64     `json:"reflinkedFiles"`
	Files          int64     `json:"files"`
}

// Source is the volume a snapshot is taken of.
type Source struct {
	VolumeID      string
	Dir           string
	CapacityBytes int64
}

// Store manages one snapshot area. Callers serialise calls on one id.
type Store struct {
	root string
	tag  string
	mode treecopy.Mode
	log  *zap.Logger
	fs   dirvol.FileSystem
}

// Open makes the area (and its parents) and its private directories.
// nodeTag prefixes this node's staging and trash names (shared pools).
func Open(root, nodeTag string, mode treecopy.Mode, log *zap.Logger) (*Store, error) {
	if err := fieldrule.CheckAbsPath("snapshot area", root, true); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	s := &Store{root: root, tag: nodeTag, mode: mode, log: log, fs: dirvol.OS()}
	for _, d := range []string{root, s.staging(), s.trash()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open snapshot area: %w", err)
		}
	}
	return s, nil
}

// Root is the snapshot area.
func (s *Store) Root() string { return s.root }

// Mode is how this area copies data.
func (s *Store) Mode() treecopy.Mode { return s.mode }

func (s *Store) staging() string { return filepath.Join(s.root, StagingDir) }
func (s *Store) trash() string   { return filepath.Join(s.root, TrashDir) }

func (s *Store) ours(name string) bool { return s.tag == "" || strings.HasPrefix(name, s.tag+".") }

// Recover removes this node's staging and trash leftovers: snapshots that
// never finished, deletes that never finished. Call it before serving.
func (s *Store) Recover(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for _, dir := range []string{s.staging(), s.trash()} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			if !s.ours(e.Name()) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Get returns the snapshot id; ErrNotFound (wrapped) when there is none.
func (s *Store) Get(_ context.Context, id string) (Snapshot, error) {
	if err := pool.ValidateID(id); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	dir := filepath.Join(s.root, id)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Snapshot{}, fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Snapshot{}, err
	}
	if !fi.IsDir() {
		return Snapshot{}, fmt.Errorf("snapshot %q: %s is not a directory (mode %s)", id, dir, fi.Mode())
	}
	return s.read(id, dir)
}

func (s *Store) read(id, dir string) (Snapshot, error) {
	snap := Snapshot{ID: id, Data: filepath.Join(dir, DataDir)}
	data, err := os.ReadFile(filepath.Join(dir, RecordFile))
	if err == nil {
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			return Snapshot{}, fmt.Errorf("snapshot %q: record %s: %w", id, filepath.Join(dir, RecordFile), err)
		}
		snap.SourceVolumeID, snap.SizeBytes, snap.Created = r.SourceVolumeID, r.SizeBytes, r.Created
		return snap, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Snapshot{}, err
	}
	// Taken by the KubeVirt driver: the source is the one directory
	// beside data, the time that of data.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Snapshot{}, err
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != DataDir {
			snap.SourceVolumeID = e.Name()
		}
	}
	fi, err := os.Stat(snap.Data)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %q: %w", id, err)
	}
	snap.Created = fi.ModTime()
	return snap, nil
}

// List returns the snapshots sorted by id.
func (s *Store) List(ctx context.Context) ([]Snapshot, error) {
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []Snapshot
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || pool.ValidateID(e.Name()) != nil {
			continue
		}
		snap, err := s.read(e.Name(), filepath.Join(s.root, e.Name()))
		if err != nil {
			s.log.Warn("unreadable snapshot left out of the list", zap.String("snapshot", e.Name()), zap.Error(err))
			continue
		}
		out = append(out, snap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Create takes snapshot id of src, or returns the existing one (created
// false) when id exists with the same source; ErrOtherSource (wrapped)
// when it exists with another.
func (s *Store) Create(ctx context.Context, id string, src Source) (Snapshot, bool, error) {
	if err := pool.ValidateID(id); err != nil {
		return Snapshot{}, false, err
	}
	existing, err := s.Get(ctx, id)
	if err == nil {
		if existing.SourceVolumeID != src.VolumeID {
			return Snapshot{}, false, fmt.Errorf("snapshot %q of volume %q: %w", id, existing.SourceVolumeID, ErrOtherSource)
		}
		return existing, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Snapshot{}, false, err
	}
	tmp := filepath.Join(s.staging(), s.tag+".snap-"+rand.Text()[:16])
	snap, err := s.build(ctx, tmp, id, src)
	if err != nil {
		if rerr := os.RemoveAll(tmp); rerr != nil {
			s.log.Warn("removing a failed snapshot's staging failed; the next start removes it", zap.String("path", tmp), zap.Error(rerr))
		}
		return Snapshot{}, false, fmt.Errorf("snapshot %q of volume %q: %w", id, src.VolumeID, err)
	}
	return snap, true, nil
}

func (s *Store) build(ctx context.Context, tmp, id string, src Source) (Snapshot, error) {
	start := time.Now()
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return Snapshot{}, err
	}
	data := filepath.Join(tmp, DataDir)
	if err := os.Mkdir(data, 0o700); err != nil {
		return Snapshot{}, err
	}
	stats, err := treecopy.Tree(ctx, src.Dir, data, s.mode)
	if err != nil {
		return Snapshot{}, err
	}
	if err := os.Mkdir(filepath.Join(tmp, src.VolumeID), 0o700); err != nil {
		return Snapshot{}, err
	}
	size := src.CapacityBytes
	if size <= 0 {
		size = stats.Bytes
	}
	r := record{SourceVolumeID: src.VolumeID, SizeBytes: size, Created: time.Now().UTC(), Copy: s.mode.String(),
		Reflinked: stats.Reflinked, Files: stats.Files}
	b, err := json.Marshal(r)
	if err != nil {
		return Snapshot{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, RecordFile), append(b, '\n'), 0o600); err != nil {
		return Snapshot{}, err
	}
	// Everything copied must be on disk before the snapshot exists:
	// ready_to_use promises a complete copy.
	if err := treecopy.Syncfs(tmp); err != nil {
		return Snapshot{}, err
	}
	final := filepath.Join(s.root, id)
	if err := s.fs.RenameNoReplace(tmp, final); err != nil {
		return Snapshot{}, fmt.Errorf("move into place: %w", err)
	}
	if err := s.fs.SyncDir(s.root); err != nil {
		return Snapshot{}, fmt.Errorf("sync snapshot area: %w", err)
	}
	s.log.Info("snapshot taken", zap.String("snapshot", id), zap.String("volume", src.VolumeID),
		zap.String("copy", s.mode.String()), zap.Int64("files", stats.Files), zap.Int64("reflinkedFiles", stats.Reflinked),
		zap.Int64("bytes", stats.Bytes), zap.Duration("took", time.Since(start)))
	return Snapshot{ID: id, SourceVolumeID: src.VolumeID, Data: filepath.Join(final, DataDir), SizeBytes: size, Created: r.Created}, nil
}

// Delete removes snapshot id; a missing one is success. The snapshot
// leaves the area in one rename (durable before Delete returns), then its
// data is removed; a crash in between leaves trash for Recover.
func (s *Store) Delete(_ context.Context, id string) error {
	if err := pool.ValidateID(id); err != nil {
		return nil //nolint:nilerr // no snapshot can have such an id: it is gone already
	}
	dir := filepath.Join(s.root, id)
	trash := filepath.Join(s.trash(), s.tag+"."+rand.Text()[:16])
	err := s.fs.Rename(dir, trash)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete snapshot %q: move to trash: %w", id, err)
	}
	if err := s.fs.SyncDir(s.root); err != nil {
		return fmt.Errorf("delete snapshot %q: sync snapshot area: %w", id, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("delete snapshot %q: remove its data (the next start finishes it): %w", id, err)
	}
	return nil
}
