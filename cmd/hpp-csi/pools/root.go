package pools

import (
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// root is one directory of volumes that a pool serves: the pool's own
// volumes directory (its path), or its legacyPath, where hpp-migrate left
// the legacy provisioner's volumes in place (legacy.go). Both are opened by
// the runner before the socket serves (or later by RetryPools, once their
// disk appears; open.go), refuse requests once their mount is gone (storeOf) and
// report health the same way (health.go); they differ only in what
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

// Volume is a volume as one lookup found it: its record, and where it
// lives (its pool, the directory of volumes holding it and that
// directory's store). Handlers read it; only the runtime acts on it.
type Volume struct {
	dirvol.Volume
	pool  *poolState
	root  *root
	store *dirvol.Store
}

// Pool is the name of the volume's pool.
func (v Volume) Pool() string { return v.pool.name() }

// Shared reports whether every node sees the volume (its pool is shared).
func (v Volume) Shared() bool { return v.pool.shared() }

// InLegacy reports whether the volume lives in its pool's legacyPath.
func (v Volume) InLegacy() bool { return v.root.legacy }

// Enforced reports whether the volume's size is enforced (a project
// quota), or would be once it has one: its pool enforces sizes, and it is
// not a legacy volume (hpp-legacy owns those).
func (v Volume) Enforced() bool { return v.pool.cfg.EnforceSize && !v.InLegacy() }
