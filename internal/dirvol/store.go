package dirvol

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Names of hpp's private areas inside the root. They start with '.', which
// pool.ValidateID refuses, so no volume id can name (or list as) one of them.
const (
	StagingDir = ".hpp-staging"
	TrashDir   = ".hpp-trash"
	MetaDir    = ".hpp-meta"
)

// rootMode is for the root and its parents: readable by everyone (pods see
// only their own volume through a bind mount, but kubelet and tools walk it).
const rootMode fs.FileMode = 0o755

// privateMode keeps staging, trash and meta away from anyone but root:
// trash holds deleted volume data until it is removed.
const privateMode fs.FileMode = 0o700

// Options configures a Store.
type Options struct {
	Logger *zap.Logger // nil: no logging
	FS     FileSystem  // nil: the real OS
	// PurgeInBackground makes Delete return once the volume is durably out
	// of the pool (in trash), and empty the trash entry later, in a queue
	// worked by one background goroutine (see purgeQueue). A
	// VM disk of hundreds of GiB takes long to remove, longer than a CO's
	// call deadline; a crash mid-purge is finished by Recover.
	PurgeInBackground bool
}

// Store manages the volumes in one root directory.
type Store struct {
	purgeInBackground bool
	root              string
	fs                FileSystem
	log               *zap.Logger
	locks             idLocks
	purges            purgeQueue
}

// Open prepares root (created with mode 0755, parents too) and its private
// areas. It does not recover: call Recover once before serving.
func Open(root string, opts Options) (*Store, error) {
	if err := validatePath("root", root); err != nil {
		return nil, err
	}
	s := &Store{root: root, fs: opts.FS, log: opts.Logger, purgeInBackground: opts.PurgeInBackground}
	if s.fs == nil {
		s.fs = OS()
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.purges = purgeQueue{remove: s.removeTrash, log: s.log}
	// MkdirAll fails unless root ends up a directory. A root that is a
	// symlink to a directory is fine (PV_DIR often is one); pool.ResolveIn
	// resolves it when it checks ids.
	if err := s.fs.MkdirAll(root, rootMode); err != nil {
		return nil, fmt.Errorf("open volume root: create root: %w", err)
	}
	for _, name := range []string{StagingDir, TrashDir, MetaDir} {
		p := filepath.Join(root, name)
		if err := s.fs.MkdirAll(p, privateMode); err != nil {
			return nil, fmt.Errorf("open volume root: create %s: %w", name, err)
		}
		// MkdirAll follows a symlink; a private area must be a real
		// directory inside root or renames into it would leave the pool.
		if err := s.checkDir(p); err != nil {
			return nil, fmt.Errorf("open volume root: %w", err)
		}
	}
	if err := s.fs.SyncDir(root); err != nil {
		return nil, fmt.Errorf("open volume root: sync root: %w", err)
	}
	return s, nil
}

func (s *Store) checkDir(p string) error {
	fi, err := s.fs.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (mode %s)", p, fi.Mode())
	}
	return nil
}

// Root returns the directory the volumes live in.
func (s *Store) Root() string { return s.root }

func (s *Store) stagingDir() string { return filepath.Join(s.root, StagingDir) }
func (s *Store) trashDir() string   { return filepath.Join(s.root, TrashDir) }
func (s *Store) metaDir() string    { return filepath.Join(s.root, MetaDir) }

// resolve is the only way the Store turns an id into a path.
//
// The root was checked when the store was opened, so on the hot path only the
// id's own entry needs a look: one lstat instead of resolving every component
// of the root twice (pool.ResolveIn), which dominated CreateVolume's syscalls.
// Anything unusual (a symlink, an error) goes through pool.ResolveIn for its
// full check and its precise message.
//
// The lstat it made is returned with the path, so that callers do not stat
// the same entry again.
func (s *Store) resolve(id string) (entry, error) {
	if err := pool.ValidateID(id); err != nil {
		return entry{}, err
	}
	joined := filepath.Join(s.root, id)
	fi, err := s.fs.Lstat(joined)
	if err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		return entry{path: joined, fi: fi}, nil
	}
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		return entry{path: joined}, nil
	}
	path, err := pool.ResolveIn(s.root, id)
	if err != nil {
		return entry{}, err
	}
	return s.lstat(path)
}

// entry is where an id lives in the root and what is there now: fi is nil
// when nothing is.
type entry struct {
	path string
	fi   fs.FileInfo
}

// randomSuffix names temporary and trash entries; crypto/rand needs no
// package state and never repeats in practice.
func randomSuffix() string { return rand.Text()[:16] }
