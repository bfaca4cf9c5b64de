package dirvol

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Names of hpp's private areas inside the root. They start with '.', which
// pool.ValidateID refuses, so no volume id can name (or list as) one of them.
const (
	StagingDir = ".hpp-staging"
	TrashDir   = ".hpp-trash"
	RecordsDir = ".hpp-records"
	// OldMetaDir held the records of earlier versions (the old record
	// format, oldrecords.go); Recover moves them to RecordsDir and
	// removes it.
	OldMetaDir = ".hpp-meta"
	// LockFile carries the cross-node per-id locks of a shared pool.
	LockFile = ".hpp-lock"
	// RecordAttr is the extended attribute of a volume directory that holds
	// its record. The trusted namespace is readable and writable only with
	// CAP_SYS_ADMIN: a pod that owns its volume can neither read nor edit
	// what hpp knows about it.
	RecordAttr = "trusted.hpp.record"
)

// rootMode is for the root and its parents: readable by everyone (pods see
// only their own volume through a bind mount, but kubelet and tools walk it).
const rootMode fs.FileMode = 0o755

// privateMode keeps staging, trash and records away from anyone but root:
// trash holds deleted volume data until it is removed.
const privateMode fs.FileMode = 0o700

// Options configures a Store.
type Options struct {
	Logger *zap.Logger // nil: no logging
	FS     FileSystem  // nil: the real OS
	// PurgeInBackground makes Delete return once the volume is durably out
	// of the pool (in trash), and empties the trash entry later, in a queue
	// worked by one background goroutine (see purgeQueue); Recover queues
	// what a crash left in trash there too, so that it returns at once. A
	// VM disk of hundreds of GiB takes long to remove, longer than a CO's
	// call deadline and longer than a restart should keep the socket down.
	PurgeInBackground bool
	// NodeID names this node's entries in staging and trash (every name
	// starts with a tag made from it), so that nodes sharing a pool never
	// pick the same name. "" is fine for a pool only this process uses.
	NodeID string
	// Shared marks a pool that other nodes use at the same time (a
	// directory every node mounts, e.g. over NFS). Create and Delete then
	// take a per-id lock that works across nodes (see LockID), and Recover
	// and purges touch only this node's staging and trash entries.
	Shared bool
	// RecordsInFiles keeps records in .hpp-records even where the
	// filesystem could keep them as attributes (tests of that path).
	RecordsInFiles bool
	// Guest opens a root that another process owns and may be using at the
	// same time (hpp-csi on hpp-legacy's PV_DIR; see guest.go). The Store
	// then never creates volumes, and Recover and purges touch only its own
	// (NodeID-tagged) staging and trash entries and no record.
	Guest bool
	// NotVolumes names directories in the root that are not volumes: a
	// snapshot area configured inside the volumes directory (as the
	// KubeVirt operator does). They are never listed, and no call may
	// create, get or delete them as a volume.
	NotVolumes []string
}

// Store manages the volumes in one root directory.
//
// Callers serialise calls on one id (the CSI driver's per-volume lock does,
// answering a second concurrent call with Aborted): the Store adds no lock of
// its own for that, except the cross-node lock of a shared pool, which
// another process's calls cannot see otherwise. Calls on different ids run
// in parallel and share their fsyncs.
type Store struct {
	purgeInBackground bool
	shared            bool
	// attrRecords: records live in the volume directories' RecordAttr,
	// not in .hpp-records (chosen at Open; see the package doc).
	attrRecords bool
	guest       bool
	root        string
	tag         string
	fs          FileSystem
	log         *zap.Logger
	purges      purgeQueue
	rootSync    *groupSync
	recordsSync *groupSync
	index       index
	notVolumes  map[string]bool
}

// Open prepares root (created with mode 0755, parents too) and its private
// areas. It does not recover: call Recover once before serving.
func Open(root string, opts Options) (*Store, error) {
	if err := validatePath("root", root); err != nil {
		return nil, err
	}
	s := &Store{root: root, fs: opts.FS, log: opts.Logger, purgeInBackground: opts.PurgeInBackground,
		shared: opts.Shared, guest: opts.Guest, tag: nodeTag(opts.NodeID)}
	if s.fs == nil {
		s.fs = OS()
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.purges = purgeQueue{remove: s.removeTrash, log: s.log}
	s.rootSync = newGroupSync(func() error { return s.fs.SyncDir(s.root) })
	s.recordsSync = newGroupSync(func() error { return s.fs.SyncDir(s.recordsDir()) })
	s.index.init()
	s.notVolumes = map[string]bool{}
	for _, n := range opts.NotVolumes {
		s.notVolumes[n] = true
	}
	// MkdirAll fails unless root ends up a directory. A root that is a
	// symlink to a directory is fine (PV_DIR often is one); pool.ResolveIn
	// resolves it when it checks ids.
	if err := s.fs.MkdirAll(root, rootMode); err != nil {
		return nil, fmt.Errorf("open volume root: create root: %w", err)
	}
	for _, name := range []string{StagingDir, TrashDir, RecordsDir} {
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
	why := "Options.RecordsInFiles"
	if !opts.RecordsInFiles {
		s.attrRecords, why = s.fs.CanKeepRecordAttrs(s.stagingDir())
	}
	if s.attrRecords {
		s.log.Info("volume records kept as directory attributes", zap.String("root", root), zap.String("attribute", RecordAttr))
	} else {
		s.log.Info("volume records kept as files", zap.String("root", root), zap.String("dir", RecordsDir), zap.String("reason", why))
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
func (s *Store) recordsDir() string { return filepath.Join(s.root, RecordsDir) }

// lockID takes the cross-node lock of id on a shared pool; elsewhere the
// caller's serialisation is enough and it costs nothing.
func (s *Store) lockID(id string) (func(), error) {
	if !s.shared {
		return func() {}, nil
	}
	unlock, err := s.fs.LockID(filepath.Join(s.root, LockFile), id)
	if err != nil {
		return nil, fmt.Errorf("take the cross-node lock of %q: %w", id, err)
	}
	return func() {
		if err := unlock(); err != nil {
			s.log.Warn("releasing a cross-node lock failed", zap.String("id", id), zap.Error(err))
		}
	}, nil
}

// resolve is the only way the Store turns an id into a path.
//
// The root was checked when the store was opened, so on the hot path only the
// id's own entry needs a look: one lstat instead of resolving every component
// of the root twice (pool.ResolveIn). Anything unusual (a symlink, an error)
// goes through pool.ResolveIn for its full check and its precise message.
// The lstat it made is returned with the path.
func (s *Store) resolve(id string) (entry, error) {
	if err := pool.ValidateID(id); err != nil {
		return entry{}, err
	}
	if s.notVolumes[id] {
		return entry{}, fieldErr("volume id", "%q is not a volume: it is hpp's snapshot area in this pool", id)
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

// lockExisting is how a change to an existing volume's record begins
// (Resize, BumpWriteGeneration, SetAttribute): under id's lock, the
// volume's entry and the volume found there. Its errors begin with what
// (e.g. resize volume "pvc-1"), but resolve's, which name the id
// themselves. On success the caller holds the lock until it calls unlock.
func (s *Store) lockExisting(ctx context.Context, id, what string) (e entry, vol Volume, unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return entry{}, Volume{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	unlock, err = s.lockID(id)
	if err != nil {
		return entry{}, Volume{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	e, err = s.resolve(id)
	if err != nil {
		unlock()
		return entry{}, Volume{}, nil, err
	}
	vol, err = s.existing(id, e)
	if err != nil {
		unlock()
		return entry{}, Volume{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	return e, vol, unlock, nil
}

// randomSuffix names temporary and trash entries; crypto/rand needs no
// package state and never repeats in practice.
func randomSuffix() string { return rand.Text()[:16] }

// tagChars are the characters of a node name kept as they are in its tag.
const tagChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-."

// maxTagLen keeps "<tag>.<kind>-<random>" well within one directory entry.
const maxTagLen = 63

// nodeTag turns a node id into the prefix of this node's staging and trash
// names. Node names are DNS subdomains ([a-z0-9.-]); dots become '_' so the
// tag never contains the '.' that ends it. Anything else, or a name too long,
// is hashed.
func nodeTag(nodeID string) string {
	if nodeID == "" {
		return "local"
	}
	ok := len(nodeID) <= maxTagLen
	for _, c := range nodeID {
		ok = ok && strings.ContainsRune(tagChars, c)
	}
	if ok {
		return strings.ReplaceAll(nodeID, ".", "_")
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(nodeID))
	return fmt.Sprintf("node-%016x", h.Sum64())
}

// ours reports whether a staging or trash entry belongs to this node: all
// of them do on a pool no other node uses.
func (s *Store) ours(name string) bool {
	return !s.shared && !s.guest || strings.HasPrefix(name, s.tag+".")
}
