package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Create makes the volume directory for id, or returns the existing one.
//
// It is idempotent: when the directory exists, it returns that volume with
// what its record says (created=false) and leaves both untouched; the
// caller decides whether the existing volume is compatible with spec.
//
// It is atomic and durable: the directory is built in staging with its
// final mode and owner, the record is made durable, and only then is the
// directory renamed into place and the root synced (the fsyncs shared with
// concurrent calls), so a crash or power loss at any point leaves either no
// volume (Recover drops the leftovers) or a complete one with its record.
func (s *Store) Create(ctx context.Context, id string, spec Spec) (vol Volume, created bool, err error) {
	if err := pool.ValidateID(id); err != nil {
		return Volume{}, false, err
	}
	if err := spec.Validate(); err != nil {
		return Volume{}, false, err
	}
	if err := s.refuseGuestCreate(id); err != nil {
		return Volume{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
	}
	if baselineNoDurability {
		return s.baselineCreate(id, spec)
	}
	unlock, err := s.lockID(id)
	if err != nil {
		return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
	}
	defer unlock()
	e, err := s.resolve(id)
	if err != nil {
		return Volume{}, false, err
	}
	vol, err = s.existing(id, e)
	if err == nil {
		return vol, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
	}

	vol, err = s.build(id, e.path, spec)
	if errors.Is(err, fs.ErrExist) {
		// Something else made the directory between our check and the
		// rename (not hpp: calls on one id are serialised): adopt it.
		e, err = s.lstat(e.path)
		if err == nil {
			vol, err = s.existing(id, e)
		}
		if err != nil {
			return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
		}
		return vol, false, nil
	}
	if err != nil {
		return Volume{}, false, fmt.Errorf("create volume %q: %w", id, err)
	}
	s.log.Debug("volume directory created", zap.String("id", id), zap.String("path", vol.Path),
		zap.Int64("capacityBytes", spec.CapacityBytes), zap.String("kind", vol.Kind),
		zap.String("mode", fmt.Sprintf("%#o", uint32(spec.mode()))), zap.Int("uid", spec.UID), zap.Int("gid", spec.GID))
	return vol, true, nil
}

// existing returns the volume at e, ErrNotFound (wrapped) if nothing is
// there, or an error if something that is not a directory is.
func (s *Store) existing(id string, e entry) (Volume, error) {
	if e.fi == nil {
		return Volume{}, fmt.Errorf("%s: %w", e.path, ErrNotFound)
	}
	if !e.fi.IsDir() {
		return Volume{}, fmt.Errorf("%s exists and is not a directory (mode %s)", e.path, e.fi.Mode())
	}
	return s.volume(id, e.path)
}

// lstat looks at path again (after a race) and describes it as an entry.
func (s *Store) lstat(path string) (entry, error) {
	fi, err := s.fs.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return entry{path: path}, nil
	}
	if err != nil {
		return entry{}, fmt.Errorf("check volume: %w", err)
	}
	return entry{path: path, fi: fi}, nil
}

// build runs the create steps. On failure it removes what it made, so that
// no half-built volume or orphan record is left (Recover covers crashes).
// A lost rename race is returned as an error matching fs.ErrExist.
func (s *Store) build(id, path string, spec Spec) (Volume, error) {
	tmp, err := s.stage(spec)
	if err != nil {
		return Volume{}, err
	}
	if spec.Fill != nil {
		if err := spec.Fill(tmp); err != nil {
			_ = s.fs.RemoveAll(tmp)
			return Volume{}, fmt.Errorf("fill: %w", err)
		}
	}
	r := newRecord(id, spec, time.Now())
	if err := s.attachRecord(tmp, r); err != nil {
		_ = s.fs.RemoveAll(tmp)
		s.undoRecord(id)
		return Volume{}, fmt.Errorf("write record: %w", err)
	}
	if err := s.fs.RenameNoReplace(tmp, path); err != nil {
		_ = s.fs.RemoveAll(tmp)
		// The record is ours either way: a directory that appeared
		// meanwhile is not one hpp made.
		s.undoRecord(id)
		if errors.Is(err, fs.ErrExist) {
			return Volume{}, err
		}
		return Volume{}, fmt.Errorf("move into place: %w", err)
	}
	// The volume is complete from here on; a failed sync is reported but not
	// undone, and a retry finds the volume in place.
	s.index.put(id, r.CapacityBytes, r.Kind)
	if err := s.rootSync.sync(); err != nil {
		return Volume{}, fmt.Errorf("sync root: %w", err)
	}
	return r.volume(path), nil
}

// stage makes the volume directory under a temporary name in staging, with
// its final owner and mode. The explicit chmod is what makes the mode exact:
// mkdir is narrowed by the process umask.
func (s *Store) stage(spec Spec) (string, error) {
	tmp, err := s.fs.MkdirTemp(s.stagingDir(), s.tag+".create-*")
	if err != nil {
		return "", fmt.Errorf("make staging directory: %w", err)
	}
	if spec.UID >= 0 || spec.GID >= 0 {
		if err := s.fs.Lchown(tmp, spec.UID, spec.GID); err != nil {
			_ = s.fs.RemoveAll(tmp)
			return "", fmt.Errorf("set owner %d:%d: %w", spec.UID, spec.GID, err)
		}
	}
	if err := s.fs.Chmod(tmp, spec.mode()); err != nil {
		_ = s.fs.RemoveAll(tmp)
		return "", fmt.Errorf("set mode %#o: %w", uint32(spec.mode()), err)
	}
	return tmp, nil
}
