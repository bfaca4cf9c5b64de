// Package poolmarker is the handshake between hpp-mounter and hpp-csi for
// pools backed by a PVC: hpp-mounter writes a small file at the root of the
// filesystem it mounted, and hpp-csi uses such a pool only while that file
// is visible. When the pool is not mounted its directory is a bare mount
// point on the OS disk, without the marker, so volumes never land there.
//
// The marker also carries the pool's identity (ID, a random UUID made
// with the marker): a new disk at the same path, or a node recreated under
// the same name, gets a new marker and so a new identity. hpp-csi writes
// the marker of a directory pool itself, and records the identity in the
// volume context of every volume it creates, so it can refuse to publish
// a volume whose data is on another disk than the one now at the path.
package poolmarker

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Name is the marker's file name at the root of the pool's volumes
// directory (<host pool path>/csi/.hpp-pool). It starts with '.', so it is
// never taken for a volume.
const Name = ".hpp-pool"

// Kind and Version identify the format; a marker with another kind is not
// ours and counts as missing.
const (
	Kind    = "hpp-pool"
	Version = 1
)

// Marker is the file's JSON content.
type Marker struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Pool is the pool's name when the mounter was told it; hpp-csi refuses
	// a marker naming another pool (the wrong PVC mounted there).
	Pool      string `json:"pool,omitempty"`
	CreatedBy string `json:"createdBy,omitempty"`
	// Node is where the marker was first written: informational only, a
	// shared pool's marker is seen by every node.
	Node string `json:"node,omitempty"`
	// ID is the pool's identity, made with the marker. Markers written
	// before identities existed have none: their pools have no identity.
	ID string `json:"id,omitempty"`
}

// Path is the marker's path in the volumes directory dir.
func Path(dir string) string { return filepath.Join(dir, Name) }

// MissingError says the marker is not there: the pool is not mounted.
type MissingError struct {
	Path   string
	Reason string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("marker %s is %s", e.Path, e.Reason)
}

// Read returns the marker in dir. A missing, unreadable or foreign file is
// a *MissingError, with the reason.
func Read(dir string) (Marker, error) {
	p := Path(dir)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Marker{}, &MissingError{Path: p, Reason: "missing"}
	}
	if err != nil {
		return Marker{}, &MissingError{Path: p, Reason: fmt.Sprintf("unreadable: %v", err)}
	}
	var m Marker
	if err := json.Unmarshal(data, &m); err != nil || m.Kind != Kind {
		return Marker{}, &MissingError{Path: p, Reason: fmt.Sprintf("not an hpp pool marker (want JSON with \"kind\":%q)", Kind)}
	}
	return m, nil
}

// Check reports whether dir holds a marker for pool: nil when it does, a
// *MissingError when the marker is absent or not ours, a plain error when it
// names another pool.
func Check(dir, pool string) error {
	m, err := Read(dir)
	if err != nil {
		return err
	}
	if m.Pool != "" && pool != "" && m.Pool != pool {
		return fmt.Errorf("marker %s belongs to pool %q, not %q: another pool's storage is mounted here", Path(dir), m.Pool, pool)
	}
	return nil
}

// Ensure writes m into dir unless a valid marker is already there: the
// first writer's content is kept, also when several nodes race on a shared
// pool (the marker is linked into place, never renamed over another). A new
// marker gets a fresh ID unless m has one. The write is durable: a crash
// leaves either no marker or a complete one.
func Ensure(dir string, m Marker) error {
	if _, err := Read(dir); err == nil {
		return nil
	} else if me := (*MissingError)(nil); !errors.As(err, &me) || me.Reason != "missing" {
		// A file that is there but not ours: never overwrite what we did
		// not write.
		return err
	}
	m.Kind, m.Version = Kind, Version
	if m.ID == "" {
		id, err := NewID()
		if err != nil {
			return err
		}
		m.ID = id
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, Name+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing pool marker: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing pool marker %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("syncing pool marker %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing pool marker %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("pool marker %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), Path(dir)); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("installing pool marker: %w", err)
	}
	return syncDir(dir)
}

// NewID returns a random (version 4) UUID.
func NewID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pool identity: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
