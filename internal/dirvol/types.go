package dirvol

import (
	"errors"
	"os"
	"time"
)

// ErrNotFound is returned (wrapped) by Get when the volume directory is
// missing.
var ErrNotFound = errors.New("volume not found")

// DefaultMode is what the KubeVirt provisioner gives a volume; fsGroup and
// StorageClass parameters narrow it.
const DefaultMode os.FileMode = 0o777

// Volume kinds recorded in the meta file. The ephemeral marker is what lets a
// node plugin tell an inline ephemeral volume (safe to delete on unpublish)
// from a persistent one.
const (
	KindPersistent = "persistent"
	KindEphemeral  = "ephemeral"
)

// Ownership is applied to a new volume directory before it is renamed into
// place. Moving a directory between parents needs write permission on it, so
// a mode without the owner's write bit works only for a privileged process
// (hpp runs as root).
type Ownership struct {
	UID, GID int         // -1 = leave as created (the process's)
	Mode     os.FileMode // permission bits only; 0 means DefaultMode
}

// Spec describes a volume to create.
type Spec struct {
	Ownership
	CapacityBytes int64             // the request, recorded for idempotency and reservation-aware capacity
	Kind          string            // KindPersistent or KindEphemeral; "" means KindPersistent
	Attributes    map[string]string // small free-form metadata (e.g. pod uid), stored in the meta file
	// Fill, when set, fills the staged volume directory (a clone or a
	// restore copies its source into it) before the volume is published:
	// a fill that fails or is cut short by a crash leaves only staging.
	Fill func(dir string) error
}

// Volume is a volume directory and what its meta file says about it.
type Volume struct {
	ID, Path      string
	CapacityBytes int64 // 0 when unknown (directory without meta: made by the old KubeVirt driver or by hand)
	Kind          string
	Attributes    map[string]string
	Created       time.Time // zero when unknown
	HasMeta       bool
	// WriteGeneration is the record's write generation (see
	// BumpWriteGeneration); empty until the first read-write publish.
	WriteGeneration string
}

// Usage is what one volume occupies.
type Usage struct {
	Bytes  int64 // allocated blocks (st_blocks*512), hard-linked files once
	Inodes int64 // entries including the top directory, hard-linked files once
}
