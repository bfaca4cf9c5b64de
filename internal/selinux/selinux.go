// Package selinux relabels a volume so containers may use it: on hosts where
// SELinux is on, a directory made by hpp carries the type of its parent (e.g.
// var_t), which confined containers cannot write; container_file_t they can.
package selinux

import (
	"context"

	opselinux "github.com/opencontainers/selinux/go-selinux"
	"go.uber.org/zap"
)

// ContainerFileType is the SELinux type that confined containers may read and
// write.
const ContainerFileType = "container_file_t"

// Labeler relabels volume trees.
type Labeler interface {
	// Enabled reports whether labels are changed at all.
	Enabled() bool
	// Relabel sets the type of path and everything below it to
	// container_file_t, keeping each file's user, role and level. It never
	// follows symbolic links and is a no-op when SELinux is off.
	Relabel(ctx context.Context, path string) error
}

// Store reads and writes the SELinux label of one file without following
// symbolic links (lgetxattr/lsetxattr of security.selinux).
type Store interface {
	LfileLabel(path string) (string, error)
	LsetFileLabel(path, label string) error
}

// New returns the Labeler for this host: the real one when SELinux is
// enabled, otherwise a no-op that says so once in the log.
func New(logger *zap.Logger) Labeler {
	return NewWithStore(logger, opselinux.GetEnabled(), HostStore{})
}

// NewWithStore is New with the host facts injected, for tests and for callers
// that know better than the host probe.
func NewWithStore(logger *zap.Logger, enabled bool, store Store) Labeler {
	if logger == nil {
		logger = zap.NewNop()
	}
	if !enabled {
		logger.Info("SELinux is disabled on this host; volumes are not relabelled")
		return noop{}
	}
	return &treeLabeler{store: store, logger: logger}
}

// HostStore labels files through github.com/opencontainers/selinux.
type HostStore struct{}

// LfileLabel returns the label of path itself, not of a link's target.
func (HostStore) LfileLabel(path string) (string, error) { return opselinux.LfileLabel(path) }

// LsetFileLabel labels path itself, not a link's target.
func (HostStore) LsetFileLabel(path, label string) error {
	return opselinux.LsetFileLabel(path, label)
}

type noop struct{}

func (noop) Enabled() bool { return false }

func (noop) Relabel(_ context.Context, path string) error {
	return validatePath(path)
}
