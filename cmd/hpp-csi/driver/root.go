package driver

import (
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// root is one directory of volumes that a pool serves: the pool's own
// volumes directory (its path), or its legacyPath, where hpp-migrate left
// the legacy provisioner's volumes in place (legacy.go). Both are opened by
// the runner before the socket serves (or later by RetryPools, once their
// disk appears; open.go), refuse requests once their mount is gone (storeOf) and
// report health the same way (root_health.go); they differ only in what
// opening does (openOwnRoot, openLegacyRoot) and in the words of messages.
type root struct {
	pool   *poolState
	path   string
	legacy bool

	mu    sync.Mutex
	store *dirvol.Store
	// device is the filesystem the directory was on when it was opened; a
	// different one later means its mount disappeared.
	device uint64
	// notOpen says why the directory is not open yet ("" once it is).
	notOpen string
}

func newRoot(pool *poolState, path string, legacy bool) *root {
	return &root{pool: pool, path: path, legacy: legacy, notOpen: "not opened yet"}
}

// label names the directory in messages.
func (r *root) label() string {
	if r.legacy {
		return "legacy directory"
	}
	return "directory"
}

// named is the directory's path, prefixed with "legacy directory" for a
// legacy one (a pool's own directory is simply its path in messages).
func (r *root) named() string {
	if r.legacy {
		return "legacy directory " + r.path
	}
	return r.path
}

func (r *root) isOpen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.store != nil
}

func (r *root) openedDevice() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.device
}

// located is a volume together with where it lives: its pool, the root
// holding it and that root's store, as one lookup found them.
type located struct {
	pool  *poolState
	root  *root
	store *dirvol.Store
	vol   dirvol.Volume
}

// inLegacy reports whether the volume lives in its pool's legacyPath.
func (l located) inLegacy() bool { return l.root.legacy }
