package dirvol_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// TestBehaviour runs the real-filesystem suite on the test's temp dir
// (whatever filesystem TMPDIR is); the node tests run it on tmpfs and XFS.
func TestBehaviour(t *testing.T) {
	inRecordForms(t, t.TempDir(), behaviourSuite)
}

func TestOpenBadRoot(t *testing.T) {
	for _, c := range []struct{ root, reason string }{
		{"", "must not be empty"},
		{"pool/csi", `"pool/csi" must be an absolute path`},
		{"/pool/./csi", `"/pool/./csi" must be a clean path ("/pool/csi")`},
		{"/pool/csi/", `"/pool/csi/" must be a clean path ("/pool/csi")`},
		{"/po\x00ol", `"/po\x00ol" must not contain a NUL byte`},
	} {
		_, err := dirvol.Open(c.root, dirvol.Options{})
		requireFieldError(t, err, "root", c.reason)
	}
}

func TestOpenRootIsFile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "file")
	writeFile(t, root, 1)
	_, err := dirvol.Open(root, dirvol.Options{})
	if want := "open volume root: create root: mkdir " + root + ": not a directory"; err == nil || err.Error() != want {
		t.Errorf("Open(file) = %v, want %s", err, want)
	}
}

// PV_DIR is often a symlink to the real disk; that is not an escape.
func TestOpenSymlinkedRoot(t *testing.T) {
	base := t.TempDir()
	disk, root := filepath.Join(base, "disk"), filepath.Join(base, "pvdir")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(disk, root); err != nil {
		t.Fatal(err)
	}
	s := open(t, root, nil)
	vol := mustCreate(t, s, "pvc-1", spec(0o750, 1))
	if vol.Path != filepath.Join(root, "pvc-1") || !exists(t, filepath.Join(disk, "pvc-1")) {
		t.Errorf("volume %q not in the symlinked root's target %s", vol.Path, disk)
	}
	requireIDs(t, s, "pvc-1")
	if err := s.Delete(context.Background(), "pvc-1"); err != nil {
		t.Fatal(err)
	}
	requireIDs(t, s)
}

func TestOpenRefusesSymlinkedPrivateArea(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, dirvol.TrashDir)); err != nil {
		t.Fatal(err)
	}
	_, err := dirvol.Open(root, dirvol.Options{})
	trash := filepath.Join(root, dirvol.TrashDir)
	if want := "open volume root: " + trash + " is not a directory (mode Lrwxrwxrwx)"; err == nil || err.Error() != want {
		t.Errorf("Open with a symlinked trash = %v, want %s", err, want)
	}
}

func TestBadID(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	for _, id := range []string{"", ".", "..", "../x", "a/b", ".hpp-trash", "lost+found", "csi", "a b", strings.Repeat("x", 256)} {
		_, _, errC := s.Create(ctx, id, spec(0, 0))
		_, errG := s.Get(ctx, id)
		errD := s.Delete(ctx, id)
		for op, err := range map[string]error{"Create": errC, "Get": errG, "Delete": errD} {
			var fe *fieldrule.FieldError
			if !errors.As(err, &fe) || fe.Field != "volume id" {
				t.Errorf("%s(%q) = %v, want a volume id error", op, id, err)
			}
		}
	}
	requireIDs(t, s)
	requirePrivateAreasEmpty(t, s.Root())
}

func TestBadSpec(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	big := map[string]string{}
	for i := range dirvol.MaxAttributes + 1 {
		big[strings.Repeat("k", i+1)] = ""
	}
	for _, c := range []struct {
		spec          dirvol.Spec
		field, reason string
	}{
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1, Mode: 0o4755}}, "spec.mode", "04755 has bits outside the permission bits 0777 (setuid, setgid, sticky and file types are not allowed)"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1, Mode: os.ModeDir | 0o755}}, "spec.mode", "020000000755 has bits outside the permission bits 0777 (setuid, setgid, sticky and file types are not allowed)"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -2, GID: -1}}, "spec.uid", "-2 is negative; use -1 to keep the process's uid"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -5}}, "spec.gid", "-5 is negative; use -1 to keep the process's gid"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, CapacityBytes: -1}, "spec.capacityBytes", "-1 is negative"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, Kind: "snapshot"}, "spec.kind", `"snapshot" is unknown; use "persistent" or "ephemeral"`},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, Attributes: map[string]string{"": "x"}}, "spec.attributes", "has an empty key"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, Attributes: big}, "spec.attributes", "has 33 entries; at most 32 are allowed"},
		{dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, Attributes: map[string]string{"k": strings.Repeat("v", 2048)}}, "spec.attributes", "hold 2049 bytes of keys and values; at most 2048 are allowed"},
	} {
		_, _, err := s.Create(context.Background(), "v", c.spec)
		requireFieldError(t, err, c.field, c.reason)
	}
	// All problems at once.
	err := dirvol.Spec{Ownership: dirvol.Ownership{UID: -2, GID: -2, Mode: 0o1777}, CapacityBytes: -1, Kind: "x"}.Validate()
	for _, f := range []string{"spec.mode: ", "spec.uid: ", "spec.gid: ", "spec.capacityBytes: ", "spec.kind: "} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Validate() = %v, want it to contain %q", err, f)
		}
	}
	requireIDs(t, s)
	requireEmpty(t, filepath.Join(s.Root(), dirvol.RecordsDir))
}

func TestCancelledContext(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Create(ctx, "v", spec(0, 0)); err == nil || err.Error() != `create volume "v": context canceled` {
		t.Errorf("Create: %v", err)
	}
	if err := s.Delete(ctx, "v"); err == nil || err.Error() != `delete volume "v": context canceled` {
		t.Errorf("Delete: %v", err)
	}
	if _, err := s.List(ctx); err == nil || err.Error() != "list volumes: context canceled" {
		t.Errorf("List: %v", err)
	}
	if _, err := s.Get(ctx, "v"); err == nil || err.Error() != `get volume "v": context canceled` {
		t.Errorf("Get: %v", err)
	}
	requireIDs(t, s)
}

// TestCorruptRecord: a record file that does not parse, or names another
// id, is reported with its path. (The attribute form: TestCorruptRecordAttr.)
func TestCorruptRecord(t *testing.T) {
	t.Setenv(envRecordsInFiles, "1")
	root := t.TempDir()
	s := open(t, root, nil)
	mustCreate(t, s, "v", spec(0, 1))
	for content, reason := range map[string]string{
		"":                                    "invalid JSON: unexpected end of JSON input",
		"{":                                   "invalid JSON: unexpected end of JSON input",
		`{"formatVersion": 9, "id": "v"}`:     "format version 9 is not supported by this hpp (1..1)",
		`{"formatVersion": 1, "id": "other"}`: `it records id "other", not "v"`,
	} {
		if err := os.WriteFile(metaPath(root, "v"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(context.Background(), "v")
		if want := `get volume "v": read record ` + metaPath(root, "v") + ": " + reason; err == nil || err.Error() != want {
			t.Errorf("Get with record %q: %v, want %s", content, err, want)
		}
	}
	// A symbolic link in place of a record is never followed, even to a
	// valid record: records are files hpp wrote.
	outside := filepath.Join(t.TempDir(), "record")
	if err := os.WriteFile(outside, []byte(`{"formatVersion": 1, "id": "v", "capacityBytes": 9}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(metaPath(root, "v")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, metaPath(root, "v")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(context.Background(), "v")
	if want := `get volume "v": open ` + metaPath(root, "v") + ": too many levels of symbolic links"; err == nil || err.Error() != want {
		t.Errorf("Get with a symlinked record: %v, want %s", err, want)
	}
}

func TestCorruptRecordAttr(t *testing.T) {
	s, _ := openWithAttrRecords(t)
	vol := mustCreate(t, s, "v", spec(0, 1))
	for content, reason := range map[string]string{
		"{":                               "invalid JSON: unexpected end of JSON input",
		`{"formatVersion": 9, "id": "v"}`: "format version 9 is not supported by this hpp (1..1)",
	} {
		if err := unix.Lsetxattr(vol.Path, dirvol.RecordAttr, []byte(content), 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(context.Background(), "v")
		if want := `get volume "v": read record the attribute ` + dirvol.RecordAttr + ` of ` + vol.Path + ": " + reason; err == nil || err.Error() != want {
			t.Errorf("Get with record %q: %v, want %s", content, err, want)
		}
	}
}

// A directory copied with its attributes (cp -a as root) carries the record
// of the volume it came from: the copy is adopted without a record, the
// original keeps its own.
func TestCopiedRecordAttrIsNotTrusted(t *testing.T) {
	s, root := openWithAttrRecords(t)
	orig := mustCreate(t, s, "pvc-orig", spec(0, 5))
	data := metaRecord(t, root, "pvc-orig")
	copyDir := filepath.Join(root, "pvc-copy")
	if err := os.Mkdir(copyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(copyDir, dirvol.RecordAttr, data, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "pvc-copy")
	if err != nil || got.HasMeta || got.CapacityBytes != 0 {
		t.Errorf("Get(copy) = %+v, %v; want an adopted volume without a record", got, err)
	}
	if got, err := s.Get(context.Background(), "pvc-orig"); err != nil || !got.HasMeta || got.CapacityBytes != 5 || got.Path != orig.Path {
		t.Errorf("Get(original) = %+v, %v", got, err)
	}
}

// openWithAttrRecords opens a Store on the test's temp dir that keeps its
// records as attributes, or stops the test saying why it cannot.
func openWithAttrRecords(t *testing.T) (*dirvol.Store, string) {
	t.Helper()
	root := t.TempDir()
	if !attrForm(root) {
		testutil.MissingPrerequisite(t, "records as attributes on %s (root, ext4/XFS/tmpfs)", root)
	}
	return open(t, root, nil), root
}
