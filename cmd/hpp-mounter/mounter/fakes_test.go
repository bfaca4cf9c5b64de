package mounter

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// fakeSys is an in-memory mount table: Bind and MountXFS push a mount on
// the target's stack, Unmount pops it.
type fakeSys struct {
	mounts  []*mountinfo.Info
	source  SourceInfo
	statErr error
	marked  map[string]bool
	calls   []string
	nextID  int
	busy    bool
}

func newFakeSys(src SourceInfo, mounts ...*mountinfo.Info) *fakeSys {
	f := &fakeSys{source: src, marked: map[string]bool{}, nextID: 100}
	for _, m := range mounts {
		f.push(m)
	}
	return f
}

func (f *fakeSys) push(m *mountinfo.Info) {
	f.nextID++
	m.ID = f.nextID
	if top := mountAt(f.mounts, m.Mountpoint); top != nil {
		m.Parent = top.ID
	}
	f.mounts = append(f.mounts, m)
}

func (f *fakeSys) Mounts() ([]*mountinfo.Info, error) {
	return append([]*mountinfo.Info(nil), f.mounts...), nil
}

func (f *fakeSys) StatSource(string) (SourceInfo, error) { return f.source, f.statErr }

func (f *fakeSys) MkdirAll(p string) error {
	f.calls = append(f.calls, "mkdir "+p)
	return nil
}

func (f *fakeSys) Bind(source, target string) error {
	f.calls = append(f.calls, "bind "+source+" "+target)
	for _, m := range f.mounts {
		if m.Mountpoint == source {
			f.push(&mountinfo.Info{Major: m.Major, Minor: m.Minor, Root: m.Root, Mountpoint: target, FSType: m.FSType, Source: m.Source})
			return nil
		}
	}
	return fmt.Errorf("bind: %s is not a mount in the fake", source)
}

func (f *fakeSys) MountXFS(device, target, data string) error {
	f.calls = append(f.calls, strings.TrimSpace("mount "+device+" "+target+" "+data))
	f.push(&mountinfo.Info{Major: f.source.Major, Minor: f.source.Minor, Root: "/", Mountpoint: target, FSType: "xfs", Source: device, VFSOptions: data})
	return nil
}

func (f *fakeSys) Unmount(target string) error {
	f.calls = append(f.calls, "umount "+target)
	if f.busy {
		return fmt.Errorf("umount %s: device or resource busy", target)
	}
	top := mountAt(f.mounts, target)
	if top == nil {
		return fmt.Errorf("umount %s: invalid argument", target)
	}
	for i, m := range f.mounts {
		if m == top {
			f.mounts = append(f.mounts[:i], f.mounts[i+1:]...)
			break
		}
	}
	return nil
}

func (f *fakeSys) Marker(dir, _, _ string) error {
	f.calls = append(f.calls, "mark "+dir)
	f.marked[dir] = true
	return nil
}

func (f *fakeSys) CheckMarker(dir, _ string) error {
	if !f.marked[dir] {
		return fmt.Errorf("marker %s/.hpp-pool is missing", dir)
	}
	return nil
}

// fakeExec answers commands from a script keyed by the command line.
type fakeExec struct {
	answers map[string][]answer
	calls   []string
}

type answer struct {
	out string
	err error
}

func (f *fakeExec) Run(_ context.Context, name string, args ...string) (string, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, line)
	q := f.answers[line]
	if len(q) == 0 {
		return "", fmt.Errorf("fake: unexpected command %q", line)
	}
	a := q[0]
	if len(q) > 1 {
		f.answers[line] = q[1:]
	}
	return a.out, a.err
}
