package selinux

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	opselinux "github.com/opencontainers/selinux/go-selinux"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// defaultLabel is used for a file with no label at all (possible on a
// filesystem labelled before SELinux was turned on) when the tree's root has
// none to copy either.
const defaultLabel = "system_u:object_r:" + ContainerFileType + ":s0"

type treeLabeler struct {
	store  Store
	logger *zap.Logger
}

func (l *treeLabeler) Enabled() bool { return true }

func (l *treeLabeler) Relabel(ctx context.Context, path string) error {
	if err := validatePath(path); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &fieldrule.FieldError{Field: "path", Reason: fmt.Sprintf("%q is a symbolic link; only a real volume directory is relabelled", path)}
	}
	w := walk{store: l.store, fallback: defaultLabel}
	if err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err // already names the path
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("relabel %s: stopped before %s: %w", path, p, err)
		}
		return w.label(p, p == path)
	}); err != nil {
		return err
	}
	l.logger.Debug("relabelled volume", zap.String("path", path), zap.Int("files", w.seen), zap.Int("changed", w.changed))
	return nil
}

// walk carries the state of one Relabel call.
type walk struct {
	store    Store
	fallback string // label for unlabelled files: the root's new label
	seen     int
	changed  int
}

// label gives p the container type. Files that already have it are left
// alone, so a repeated Relabel only reads.
func (w *walk) label(p string, isRoot bool) error {
	w.seen++
	cur, err := w.store.LfileLabel(p)
	if err != nil && !errors.Is(err, unix.ENODATA) {
		return &fs.PathError{Op: "read SELinux label of", Path: p, Err: cause(err)}
	}
	want := w.fallback
	if cur != "" {
		c, err := opselinux.NewContext(cur)
		if err != nil {
			return &fs.PathError{Op: "parse SELinux label " + fmt.Sprintf("%q", cur) + " of", Path: p, Err: fmt.Errorf("%w: want user:role:type[:level]", err)}
		}
		c["type"] = ContainerFileType
		want = c.Get()
	}
	if isRoot {
		w.fallback = want
	}
	if cur == want {
		return nil
	}
	if err := w.store.LsetFileLabel(p, want); err != nil {
		return &fs.PathError{Op: "set SELinux label " + want + " on", Path: p, Err: cause(err)}
	}
	w.changed++
	return nil
}

// cause drops the library's own path wrapper so the path is named once.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func validatePath(path string) error { return fieldrule.CheckAbsPath("path", path, false) }
