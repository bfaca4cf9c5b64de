package dirvol_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// errInjected is what a faulted step fails with.
var errInjected = errors.New("injected fault")

// call is one mutating FileSystem call, as seen by hookFS.
type call struct {
	Op    string
	Paths []string
}

// err is the error the real filesystem would return for this call, with the
// injected cause: the paths in it are what the Store's messages must show.
func (c call) err() error {
	if len(c.Paths) == 2 {
		return &os.LinkError{Op: strings.ToLower(c.Op), Old: c.Paths[0], New: c.Paths[1], Err: errInjected}
	}
	return &fs.PathError{Op: strings.ToLower(c.Op), Path: c.Paths[0], Err: errInjected}
}

// label names the call by operation and the areas of root it touches, which
// is stable across runs (temp names are random): "Rename(staging→records)".
func (c call) label(root string) string {
	areas := make([]string, len(c.Paths))
	for i, p := range c.Paths {
		areas[i] = area(root, p)
	}
	return c.Op + "(" + strings.Join(areas, "→") + ")"
}

func area(root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "outside"
	}
	switch first, _, _ := strings.Cut(rel, string(filepath.Separator)); first {
	case ".":
		return "root"
	case dirvol.StagingDir:
		return "staging"
	case dirvol.TrashDir:
		return "trash"
	case dirvol.RecordsDir:
		return "records"
	default:
		return "volume"
	}
}

// hookFS wraps a FileSystem and calls before/after around every mutating
// call. before may return an error, which fails the call without running it
// (failure injection); after runs once the call succeeded (crash points).
type hookFS struct {
	dirvol.FileSystem
	before func(call) error
	after  func(call)
}

func (h *hookFS) do(op string, fn func() error, paths ...string) error {
	c := call{Op: op, Paths: paths}
	if h.before != nil {
		if err := h.before(c); err != nil {
			return err
		}
	}
	if err := fn(); err != nil {
		return err
	}
	if h.after != nil {
		h.after(c)
	}
	return nil
}

func (h *hookFS) MkdirAll(p string, perm fs.FileMode) error {
	return h.do("MkdirAll", func() error { return h.FileSystem.MkdirAll(p, perm) }, p)
}

func (h *hookFS) MkdirTemp(dir, pattern string) (string, error) {
	var out string
	err := h.do("MkdirTemp", func() (err error) {
		out, err = h.FileSystem.MkdirTemp(dir, pattern)
		return err
	}, filepath.Join(dir, pattern))
	return out, err
}

func (h *hookFS) Rename(o, n string) error {
	return h.do("Rename", func() error { return h.FileSystem.Rename(o, n) }, o, n)
}

func (h *hookFS) RenameNoReplace(o, n string) error {
	return h.do("RenameNoReplace", func() error { return h.FileSystem.RenameNoReplace(o, n) }, o, n)
}

func (h *hookFS) Remove(p string) error {
	return h.do("Remove", func() error { return h.FileSystem.Remove(p) }, p)
}

func (h *hookFS) RemoveAll(p string) error {
	return h.do("RemoveAll", func() error { return h.FileSystem.RemoveAll(p) }, p)
}

func (h *hookFS) Chmod(p string, m fs.FileMode) error {
	return h.do("Chmod", func() error { return h.FileSystem.Chmod(p, m) }, p)
}

func (h *hookFS) Lchown(p string, uid, gid int) error {
	return h.do("Lchown", func() error { return h.FileSystem.Lchown(p, uid, gid) }, p)
}

func (h *hookFS) WriteFile(p string, data []byte, perm fs.FileMode) error {
	return h.do("WriteFile", func() error { return h.FileSystem.WriteFile(p, data, perm) }, p)
}

func (h *hookFS) SyncFile(p string) error {
	return h.do("SyncFile", func() error { return h.FileSystem.SyncFile(p) }, p)
}

func (h *hookFS) SyncDir(p string) error {
	return h.do("SyncDir", func() error { return h.FileSystem.SyncDir(p) }, p)
}

func (h *hookFS) SetRecordAttr(p string, data []byte) error {
	return h.do("SetRecordAttr", func() error { return h.FileSystem.SetRecordAttr(p, data) }, p)
}
