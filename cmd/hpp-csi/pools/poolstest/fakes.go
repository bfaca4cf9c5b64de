// Package poolstest has the side effects the pool runtime is run with in
// tests: mounts recorded instead of made, the real filesystem with statfs,
// device ids and usage walks under the test's control, and a labeller
// that only remembers. The handlers' tests build a pools.Runtime over them,
// so they never reach the OS adapters themselves.
package poolstest

import (
	"context"
	"os"
	"sync"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/host"
	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Mounter records bind mounts instead of making them.
type Mounter struct {
	mu       sync.Mutex
	Mounts   map[string]string // target -> source
	ReadOnly map[string]bool
	// FailOn makes BindMount fail for this target.
	FailOn string
}

func NewMounter() *Mounter {
	return &Mounter{Mounts: map[string]string{}, ReadOnly: map[string]bool{}}
}

func (m *Mounter) BindMount(source, target string, ro bool, _ []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailOn == target {
		return os.ErrPermission
	}
	m.Mounts[target] = source
	m.ReadOnly[target] = ro
	return nil
}

func (m *Mounter) Unmount(target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.Mounts, target)
	return nil
}

func (m *Mounter) IsMountPoint(p string) (bool, error) {
	if _, err := os.Lstat(p); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.Mounts[p]
	return ok, nil
}

func (m *Mounter) BindTargets(source string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for t, s := range m.Mounts {
		if s == source {
			out = append(out, t)
		}
	}
	return out, nil
}

// source is where target is bind mounted from, if it is.
func (m *Mounter) source(target string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	src, ok := m.Mounts[target]
	return src, ok
}

// FS is the real filesystem with statfs, device ids and usage walks under
// the test's control.
type FS struct {
	host.Filesystem
	mu    sync.Mutex
	stats map[string]capacity.Stats // by pool path; missing = real statfs
	// Devices overrides the device id of a path (a mount that went away).
	Devices map[string]uint64
	// Walks counts the usage walks.
	Walks   int
	mounter *Mounter
}

// NewFS is the real filesystem as seen through mounter's fake mounts.
func NewFS(mounter *Mounter) *FS {
	return &FS{stats: map[string]capacity.Stats{}, Devices: map[string]uint64{}, mounter: mounter}
}

func (f *FS) Statfs(p string) (capacity.Stats, error) {
	f.mu.Lock()
	st, ok := f.stats[p]
	f.mu.Unlock()
	if ok {
		return st, nil
	}
	return f.Filesystem.Statfs(p)
}

// SetStats makes Statfs of p answer st.
func (f *FS) SetStats(p string, st capacity.Stats) {
	f.mu.Lock()
	f.stats[p] = st
	f.mu.Unlock()
}

func (f *FS) DeviceOf(p string) (uint64, error) {
	dev, err := f.Filesystem.DeviceOf(p)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.Devices[p]; ok {
		return d, nil
	}
	return dev, nil
}

// SameFile follows the fake mounts: a target "is" its source.
func (f *FS) SameFile(a, b string) (bool, error) {
	if f.mounter != nil {
		if src, ok := f.mounter.source(b); ok {
			return src == a, nil
		}
	}
	return f.Filesystem.SameFile(a, b)
}

func (f *FS) Usage(ctx context.Context, p string) (dirvol.Usage, error) {
	f.mu.Lock()
	f.Walks++
	f.mu.Unlock()
	return dirvol.DirUsage(ctx, p)
}

// Labeler remembers what it labelled.
type Labeler struct {
	// mu: copies from other nodes relabel from their own goroutines.
	mu       sync.Mutex
	Labelled []string
	// Err is returned by Relabel when set.
	Err error
}

func (l *Labeler) Enabled() bool { return true }

func (l *Labeler) Relabel(_ context.Context, p string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Err != nil {
		return l.Err
	}
	l.Labelled = append(l.Labelled, p)
	return nil
}
