package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// root is one directory of volumes that a pool serves: the pool's own
// volumes directory (its path), or its legacyPath, where hpp-migrate left
// the legacy provisioner's volumes in place (legacy.go). Both are opened by
// the runner before the socket serves (or later by RetryPools, once their
// disk appears), refuse requests once their mount is gone (storeOf) and
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

// openRoot opens r, unless it is open already, and finishes what a crash
// left in it; on failure it keeps the reason for storeOf to report.
func (d *Driver) openRoot(ctx context.Context, p *poolState, r *root) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store != nil {
		return nil
	}
	open := d.openOwnRoot
	if r.legacy {
		open = d.openLegacyRoot
	}
	store, dev, err := open(ctx, p)
	if err != nil {
		r.notOpen = notOpenReason(err)
		return err
	}
	r.store, r.device, r.notOpen = store, dev, ""
	return nil
}

// notOpenReason is what storeOf says while a directory could not be opened.
func notOpenReason(err error) string {
	var nr *errPoolNotReady
	if errors.As(err, &nr) {
		return nr.reason
	}
	return err.Error()
}

// storeOf returns the store of r for a request. It writes nothing: a
// directory that is not open is Unavailable until the runner opens it. One
// stat per call checks that it is still on the filesystem it was opened
// on: if its disk was unmounted, going on would report its volumes as
// deleted and write new ones to the wrong disk.
func (d *Driver) storeOf(r *root) (*dirvol.Store, error) {
	r.mu.Lock()
	store, opened, why := r.store, r.device, r.notOpen
	r.mu.Unlock()
	if store == nil {
		return nil, &errPoolNotReady{pool: r.pool.name(), reason: why}
	}
	if !r.legacy {
		// Before the device check, so an unmounted pool says so in those words.
		if err := checkMounted(r.pool.cfg); err != nil {
			return nil, err
		}
	}
	dev, err := d.deps.FS.DeviceOf(r.path)
	if err != nil {
		reason := err.Error()
		if r.legacy {
			reason = "legacy directory " + reason
		}
		if errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("%s %s is gone: its mount disappeared (remount it; hpp-csi does not recreate it)", r.label(), r.path)
		}
		return nil, &errPoolNotReady{pool: r.pool.name(), reason: reason}
	}
	if dev != opened {
		return nil, &errPoolNotReady{pool: r.pool.name(), reason: fmt.Sprintf(
			"%s is on another filesystem than when it was opened (device %d, was %d): its mount disappeared; remount it (or restart hpp-csi if the pool moved to a new disk on purpose)",
			r.named(), dev, opened)}
	}
	return store, nil
}
