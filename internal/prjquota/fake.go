package prjquota

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// key names path's inode, so that a project set on a staged directory is
// still there after the rename that publishes it.
func key(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("inode %d:%d", st.Dev, st.Ino)
	}
	return filepath.Clean(path)
}

// Fake is an in-memory Backend for tests and benchmarks: projects by path,
// limits and usage by ID. It enforces nothing; tests set usage by hand.
type Fake struct {
	mu       sync.Mutex
	probe    Probe
	projects map[string]uint32 // by inode (as the kernel keeps it), see key
	quotas   map[uint32]Quota
	// Fail, when it returns an error for an operation ("Quota", "SetLimit",
	// "SetProject", "Project", "Probe"), makes that call fail.
	Fail func(op string, id uint32) error
	// Calls counts the calls per operation.
	Calls map[string]int
}

// NewFake is a filesystem with project quotas enforced: XFS with prjquota.
func NewFake() *Fake {
	return &Fake{probe: Probe{FSType: "xfs", Accounting: true, Enforcing: true},
		projects: map[string]uint32{}, quotas: map[uint32]Quota{}, Calls: map[string]int{}}
}

// SetProbe sets what Probe answers.
func (f *Fake) SetProbe(p Probe) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probe = p
}

// SetUsage sets what project id is charged.
func (f *Fake) SetUsage(id uint32, bytes, inodes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.quotas[id]
	q.UsedBytes, q.UsedInodes = bytes, inodes
	f.quotas[id] = q
}

// ProjectOf is the project set on path (0: none).
func (f *Fake) ProjectOf(path string) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.projects[key(path)]
}

// Limit is project id's hard limit.
func (f *Fake) Limit(id uint32) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.quotas[id].HardBytes
}

func (f *Fake) call(op string, id uint32) error {
	f.Calls[op]++
	if f.Fail != nil {
		return f.Fail(op, id)
	}
	return nil
}

func (f *Fake) Probe(string) (Probe, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Probe", 0); err != nil {
		return Probe{}, err
	}
	return f.probe, nil
}

func (f *Fake) Project(path string) (uint32, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Project", 0); err != nil {
		return 0, false, err
	}
	id, ok := f.projects[key(path)]
	return id, ok, nil
}

func (f *Fake) SetProject(path string, id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("SetProject", id); err != nil {
		return err
	}
	f.projects[key(path)] = id
	return nil
}

func (f *Fake) Quota(_ string, id uint32) (Quota, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Quota", id); err != nil {
		return Quota{}, err
	}
	return f.quotas[id], nil
}

func (f *Fake) SetLimit(_ string, id uint32, bytes int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("SetLimit", id); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("negative limit %d", bytes)
	}
	q := f.quotas[id]
	q.HardBytes = bytes
	f.quotas[id] = q
	return nil
}
