// Package mounter makes a pool PVC appear as a storage pool directory on
// the host: a filesystem PVC is bind-mounted from the kubelet's own mount of
// it, a block PVC gets XFS (only when certainly empty) and is mounted. Each
// step is idempotent, so the long-lived pod re-runs it to keep the pool
// mounted, and a restarted pod adopts the mount it finds. The marker file
// (internal/poolmarker) tells hpp-csi that the pool is really mounted.
package mounter

import (
	"errors"
	"fmt"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap"
)

// Config is what one mounter is for.
type Config struct {
	// Source is the pool PVC in this container: a mounted directory or a
	// block device (--storagePoolPath).
	Source string
	// HostRoot is where the host's root is in this container (--hostPath).
	HostRoot string
	// Target is the host path where the pool appears (--mountPath).
	Target string
	// Pool and Node go into the marker.
	Pool, Node string
	// EnforceSize: the pool enforces volume sizes with project quotas
	// (--enforce-size), so the XFS it mounts from a block PVC is mounted
	// with prjquota. A filesystem PVC is bind mounted as kubelet mounted
	// it: its mount options are its StorageClass's, and hpp-csi reports
	// the pool not ready if they lack prjquota.
	EnforceSize bool
}

// xfsMountData is the XFS mount options: prjquota for an enforcing pool
// (XFS turns quota accounting on only at mount time, never on remount).
func (c Config) xfsMountData() string {
	if c.EnforceSize {
		return "prjquota"
	}
	return ""
}

// target is the pool's mount point as seen from this container.
func (c Config) target() string { return hostJoin(c.HostRoot, c.Target) }

// Kind is what the pool PVC is.
type Kind int

const (
	KindDirectory Kind = iota
	KindBlock
)

// SourceInfo describes the PVC in the container.
type SourceInfo struct {
	Kind Kind
	// Major and Minor are the block device's number (KindBlock only).
	Major, Minor int
}

// Sys is every side effect on mounts and files that the mounter needs;
// linuxSys is the real one.
type Sys interface {
	Mounts() ([]*mountinfo.Info, error)
	StatSource(path string) (SourceInfo, error)
	MkdirAll(path string) error
	Bind(source, target string) error
	// MountXFS mounts the XFS on device at target with the mount options
	// data ("" for none).
	MountXFS(device, target, data string) error
	Unmount(target string) error
	// Marker writes the pool marker at the root of dir unless present;
	// CheckMarker says whether it is there.
	Marker(dir, pool, node string) error
	CheckMarker(dir, pool string) error
}

// Mounter turns one pool PVC into a mounted pool.
type Mounter struct {
	cfg   Config
	sys   Sys
	probe Prober
	mkfs  Formatter
	log   *zap.Logger
}

// New returns a mounter for cfg with its dependencies.
func New(cfg Config, sys Sys, probe Prober, mkfs Formatter, log *zap.Logger) *Mounter {
	return &Mounter{cfg: cfg, sys: sys, probe: probe, mkfs: mkfs, log: log}
}

// RefusedError is a state the mounter will not change on its own: the
// target mounted from something else, a device with a foreign signature.
// Nothing was touched; a person has to look.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is a *RefusedError.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
