package selinux

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"

	opselinux "github.com/opencontainers/selinux/go-selinux"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// fakeStore keeps labels in memory, keyed by path, and records every call.
type fakeStore struct {
	mu       sync.Mutex
	labels   map[string]string
	readErr  map[string]error
	writeErr map[string]error
	calls    []string // "get <path>" / "set <path> <label>"
	onGet    func(path string)
}

func newFakeStore() *fakeStore {
	return &fakeStore{labels: map[string]string{}, readErr: map[string]error{}, writeErr: map[string]error{}}
}

func (f *fakeStore) LfileLabel(path string) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "get "+path)
	hook := f.onGet
	l, ok := f.labels[path]
	err := f.readErr[path]
	f.mu.Unlock()
	if hook != nil {
		hook(path)
	}
	if err != nil {
		return "", &fs.PathError{Op: "lgetxattr", Path: path, Err: err}
	}
	if !ok {
		return "", &fs.PathError{Op: "lgetxattr", Path: path, Err: unix.ENODATA}
	}
	return l, nil
}

func (f *fakeStore) LsetFileLabel(path, label string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "set "+path+" "+label)
	if err := f.writeErr[path]; err != nil {
		return &fs.PathError{Op: "lsetxattr(label=" + label + ")", Path: path, Err: err}
	}
	f.labels[path] = label
	return nil
}

func (f *fakeStore) sets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c[:3] == "set" {
			out = append(out, c)
		}
	}
	return out
}

// volumeTree makes a small volume with nested directories, a link to a file
// outside the volume and a dangling link; it returns the volume and the
// outside file.
func volumeTree(t *testing.T) (vol, outside string) {
	t.Helper()
	base := t.TempDir()
	vol = filepath.Join(base, "pvc-1")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{vol, vol + "/sub", vol + "/sub/deeper"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{outside, vol + "/a", vol + "/sub/b", vol + "/sub/deeper/c", vol + "/unlabelled", vol + "/done"} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, vol+"/link"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent/hpp", vol+"/sub/dangling"); err != nil {
		t.Fatal(err)
	}
	return vol, outside
}

func TestRelabelTree(t *testing.T) {
	vol, outside := volumeTree(t)
	store := newFakeStore()
	for p, l := range map[string]string{
		vol:                   "system_u:object_r:var_t:s0",
		vol + "/a":            "system_u:object_r:var_t:s0",
		vol + "/sub":          "unconfined_u:object_r:user_home_t:s0",
		vol + "/sub/b":        "staff_u:object_r:tmp_t:s0:c1,c2",
		vol + "/sub/deeper":   "system_u:object_r:var_t",
		vol + "/sub/deeper/c": "system_u:object_r:var_t:s0-s0:c0.c1023",
		vol + "/done":         "system_u:object_r:container_file_t:s0:c5,c6",
		vol + "/link":         "system_u:object_r:var_t:s0",
		vol + "/sub/dangling": "system_u:object_r:var_t:s0",
		outside:               "system_u:object_r:etc_t:s0",
	} {
		store.labels[p] = l
	}
	l := NewWithStore(zap.NewNop(), true, store)
	if !l.Enabled() {
		t.Fatal("Enabled() = false for an enabled labeler")
	}
	if err := l.Relabel(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		vol:                   "system_u:object_r:container_file_t:s0",
		vol + "/a":            "system_u:object_r:container_file_t:s0",
		vol + "/sub":          "unconfined_u:object_r:container_file_t:s0",
		vol + "/sub/b":        "staff_u:object_r:container_file_t:s0:c1,c2",
		vol + "/sub/deeper":   "system_u:object_r:container_file_t",
		vol + "/sub/deeper/c": "system_u:object_r:container_file_t:s0-s0:c0.c1023",
		vol + "/done":         "system_u:object_r:container_file_t:s0:c5,c6",
		// No label of its own: it gets the volume root's new label.
		vol + "/unlabelled": "system_u:object_r:container_file_t:s0",
		// Links are labelled themselves; their targets are not touched.
		vol + "/link":         "system_u:object_r:container_file_t:s0",
		vol + "/sub/dangling": "system_u:object_r:container_file_t:s0",
		outside:               "system_u:object_r:etc_t:s0",
	}
	if !reflect.DeepEqual(store.labels, want) {
		t.Fatalf("labels:\n got %v\nwant %v", store.labels, want)
	}
	// Already right: not written again.
	for _, c := range store.sets() {
		if c == "set "+vol+"/done "+want[vol+"/done"] {
			t.Errorf("rewrote a label that was already right: %s", c)
		}
	}
	if n := len(store.sets()); n != 9 {
		t.Errorf("%d label writes, want 9: %v", n, store.sets())
	}

	// A second run only reads.
	before := len(store.sets())
	if err := l.Relabel(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	if after := store.sets(); len(after) != before {
		t.Fatalf("second Relabel wrote labels: %v", after[before:])
	}
}

func TestRelabelUnlabelledRoot(t *testing.T) {
	vol, _ := volumeTree(t)
	store := newFakeStore()
	store.labels[vol+"/a"] = "system_u:object_r:var_t:s0:c3"
	if err := NewWithStore(nil, true, store).Relabel(context.Background(), vol+"/sub"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{vol + "/sub", vol + "/sub/b", vol + "/sub/deeper/c"} {
		if got := store.labels[p]; got != "system_u:object_r:container_file_t:s0" {
			t.Errorf("%s: %q", p, got)
		}
	}
	if _, ok := store.labels[vol+"/a"]; !ok || store.labels[vol+"/a"] != "system_u:object_r:var_t:s0:c3" {
		t.Errorf("file outside the relabelled subtree changed: %q", store.labels[vol+"/a"])
	}
}

func TestRelabelErrors(t *testing.T) {
	vol, _ := volumeTree(t)
	tests := []struct {
		name  string
		setup func(*fakeStore)
		want  string
		is    error
	}{
		{"write fails", func(s *fakeStore) { s.writeErr[vol+"/sub/b"] = unix.EPERM },
			"set SELinux label system_u:object_r:container_file_t:s0 on " + vol + "/sub/b: operation not permitted", unix.EPERM},
		{"read fails", func(s *fakeStore) { s.readErr[vol+"/sub"] = unix.EIO },
			"read SELinux label of " + vol + "/sub: input/output error", unix.EIO},
		{"filesystem without labels", func(s *fakeStore) { s.writeErr[vol] = unix.EOPNOTSUPP },
			"set SELinux label system_u:object_r:container_file_t:s0 on " + vol + ": operation not supported", unix.EOPNOTSUPP},
		{"garbage label", func(s *fakeStore) { s.labels[vol+"/a"] = "garbage" },
			`parse SELinux label "garbage" of ` + vol + "/a: invalid Label: want user:role:type[:level]", opselinux.ErrInvalidLabel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore()
			tt.setup(store)
			err := NewWithStore(nil, true, store).Relabel(context.Background(), vol)
			if err == nil || err.Error() != tt.want || !errors.Is(err, tt.is) {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestRelabelStopsWhenCancelled(t *testing.T) {
	vol, _ := volumeTree(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := newFakeStore()
	store.onGet = func(p string) {
		if p == vol+"/a" {
			cancel()
		}
	}
	err := NewWithStore(nil, true, store).Relabel(ctx, vol)
	// WalkDir visits in lexical order: vol, vol/a, then vol/done.
	want := "relabel " + vol + ": stopped before " + vol + "/done: context canceled"
	if !errors.Is(err, context.Canceled) || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	touched := append([]string(nil), store.calls...)
	sort.Strings(touched)
	wantCalls := []string{
		"get " + vol,
		"get " + vol + "/a",
		"set " + vol + " system_u:object_r:container_file_t:s0",
		"set " + vol + "/a system_u:object_r:container_file_t:s0",
	}
	if !reflect.DeepEqual(touched, wantCalls) {
		t.Fatalf("calls after cancel:\n got %v\nwant %v", touched, wantCalls)
	}
}

func TestRelabelBadPath(t *testing.T) {
	vol, _ := volumeTree(t)
	missing := filepath.Join(vol, "gone")
	for _, enabled := range []bool{true, false} {
		l := NewWithStore(nil, enabled, newFakeStore())
		for path, want := range map[string]string{
			"":       `path: must not be empty`,
			"pvc-1":  `path: "pvc-1" must be an absolute path`,
			"/v\x00": `path: "/v\x00" must not contain a NUL byte`,
		} {
			err := l.Relabel(context.Background(), path)
			var fe *fieldrule.FieldError
			if !errors.As(err, &fe) || err.Error() != want {
				t.Errorf("enabled=%v Relabel(%q) = %v, want %s", enabled, path, err, want)
			}
		}
	}
	l := NewWithStore(nil, true, newFakeStore())
	err := l.Relabel(context.Background(), vol+"/link")
	if want := `path: "` + vol + `/link" is a symbolic link; only a real volume directory is relabelled`; err == nil || err.Error() != want {
		t.Errorf("Relabel(symlink) = %v, want %s", err, want)
	}
	err = l.Relabel(context.Background(), missing)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "lstat "+missing+": no such file or directory" {
		t.Errorf("Relabel(missing) = %v", err)
	}
}

func TestDisabledIsNoopAndLogsOnce(t *testing.T) {
	vol, _ := volumeTree(t)
	core, logs := observer.New(zapcore.DebugLevel)
	store := newFakeStore()
	l := NewWithStore(zap.New(core), false, store)
	if l.Enabled() {
		t.Fatal("Enabled() = true with SELinux off")
	}
	for range 3 {
		if err := l.Relabel(context.Background(), vol); err != nil {
			t.Fatal(err)
		}
	}
	if len(store.calls) != 0 {
		t.Fatalf("no-op labeler touched labels: %v", store.calls)
	}
	entries := logs.AllUntimed()
	if len(entries) != 1 || entries[0].Message != "SELinux is disabled on this host; volumes are not relabelled" || entries[0].Level != zapcore.InfoLevel {
		t.Fatalf("log entries: %+v", entries)
	}
}

func TestNewFollowsHost(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := New(zap.New(core))
	if l.Enabled() != opselinux.GetEnabled() {
		t.Fatalf("Enabled() = %v, host says %v", l.Enabled(), opselinux.GetEnabled())
	}
	wantLogs := 0
	if !l.Enabled() {
		wantLogs = 1
	}
	if logs.Len() != wantLogs {
		t.Fatalf("%d log entries at construction, want %d: %+v", logs.Len(), wantLogs, logs.AllUntimed())
	}
}
