package dirvol_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// envRecordsInFiles makes the tests' Stores keep record files (set by
// inRecordForms; crash children inherit it).
const envRecordsInFiles = "HPP_DIRVOL_TEST_RECORDS_IN_FILES"

// testOptions are the Options of a test Store: the record form the test
// runs in, and fsys (nil: the real OS).
func testOptions(fsys dirvol.FileSystem) dirvol.Options {
	return dirvol.Options{FS: fsys, RecordsInFiles: os.Getenv(envRecordsInFiles) != ""}
}

// inRecordForms runs fn once with records as directory attributes (skipped,
// with the reason, where base cannot keep them: not root, or a filesystem
// without ordered metadata) and once with record files.
func inRecordForms(t *testing.T, base string, fn func(t *testing.T, base string)) {
	t.Run("AttrRecords", func(t *testing.T) {
		if err := os.MkdirAll(base, 0o755); err != nil {
			t.Fatal(err)
		}
		if ok, why := dirvol.OS().CanKeepRecordAttrs(base); !ok {
			testutil.MissingPrerequisite(t, "records as attributes: %s", why)
		}
		fn(t, filepath.Join(base, "attr"))
	})
	t.Run("FileRecords", func(t *testing.T) {
		t.Setenv(envRecordsInFiles, "1")
		fn(t, filepath.Join(base, "files"))
	})
}

// attrForm reports whether the Store at root keeps attribute records: the
// test's form, on a filesystem that can.
func attrForm(root string) bool {
	dir := filepath.Join(root, dirvol.StagingDir)
	if _, err := os.Stat(dir); err != nil {
		dir = root // not opened yet: the filesystem is the same
	}
	ok, _ := dirvol.OS().CanKeepRecordAttrs(dir)
	return ok && os.Getenv(envRecordsInFiles) == ""
}

func open(t *testing.T, root string, fsys dirvol.FileSystem) *dirvol.Store {
	t.Helper()
	s, err := dirvol.Open(root, testOptions(fsys))
	if err != nil {
		t.Fatalf("Open(%s): %v", root, err)
	}
	return s
}

// spec is a volume spec that leaves the owner alone.
func spec(mode os.FileMode, capacity int64) dirvol.Spec {
	return dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1, Mode: mode}, CapacityBytes: capacity}
}

func mustCreate(t *testing.T, s *dirvol.Store, id string, sp dirvol.Spec) dirvol.Volume {
	t.Helper()
	vol, created, err := s.Create(context.Background(), id, sp)
	if err != nil {
		t.Fatalf("Create(%q): %v", id, err)
	}
	if !created {
		t.Fatalf("Create(%q): created = false for a new volume", id)
	}
	return vol
}

// names lists the entry names of dir (nil if it is missing).
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func requireEmpty(t *testing.T, dir string) {
	t.Helper()
	if n := names(t, dir); len(n) != 0 {
		t.Errorf("%s is not empty: %q", dir, n)
	}
}

// requirePrivateAreasEmpty checks that nothing is left in staging and trash.
func requirePrivateAreasEmpty(t *testing.T, root string) {
	t.Helper()
	requireEmpty(t, filepath.Join(root, dirvol.StagingDir))
	requireEmpty(t, filepath.Join(root, dirvol.TrashDir))
}

// stat returns mode bits and owner of p (not following links).
func stat(t *testing.T, p string) (os.FileMode, uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode(), st.Uid, st.Gid
}

func metaPath(root, id string) string {
	return filepath.Join(root, dirvol.RecordsDir, id)
}

// hasRecord reports whether id has a record on disk, in either form.
func hasRecord(t *testing.T, root, id string) bool {
	t.Helper()
	if exists(t, metaPath(root, id)) {
		return true
	}
	_, err := unix.Lgetxattr(filepath.Join(root, id), dirvol.RecordAttr, make([]byte, 64<<10))
	return err == nil
}

// metaRecord returns the JSON of id's record, read from the disk in the
// form the Store keeps.
func metaRecord(t *testing.T, root, id string) []byte {
	t.Helper()
	if !attrForm(root) {
		data, err := os.ReadFile(metaPath(root, id))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	buf := make([]byte, 64<<10)
	n, err := unix.Lgetxattr(filepath.Join(root, id), dirvol.RecordAttr, buf)
	if err != nil {
		t.Fatalf("record attribute of %s: %v", id, err)
	}
	return buf[:n]
}

func readMeta(t *testing.T, root, id string) map[string]any {
	t.Helper()
	data := metaRecord(t, root, id)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("meta of %q: %v", id, err)
	}
	return m
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func ids(vols []dirvol.Volume) []string {
	out := []string{}
	for _, v := range vols {
		out = append(out, v.ID)
	}
	return out
}

func requireIDs(t *testing.T, s *dirvol.Store, want ...string) {
	t.Helper()
	vols, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want == nil {
		want = []string{}
	}
	if got := ids(vols); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
}

func requireFieldError(t *testing.T, err error, field, reason string) {
	t.Helper()
	var fe *fieldrule.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *fieldrule.FieldError", err, err)
	}
	if fe.Field != field || fe.Reason != reason {
		t.Errorf("FieldError = {%q, %q}, want {%q, %q}", fe.Field, fe.Reason, field, reason)
	}
}

func writeFile(t *testing.T, p string, size int) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + 1) // not zeros: nothing may turn it into a hole
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
