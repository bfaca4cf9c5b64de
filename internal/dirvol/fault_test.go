package dirvol_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// probe runs op once on a fresh store under root and returns the mutating
// FileSystem calls it made, in order.
func probe(t *testing.T, root string, setup func(*dirvol.Store), op func(*dirvol.Store) error) []call {
	t.Helper()
	h := &hookFS{FileSystem: dirvol.OS()}
	s := open(t, root, h)
	if setup != nil {
		setup(s)
	}
	var calls []call
	h.after = func(c call) { calls = append(calls, c) }
	if err := op(s); err != nil {
		t.Fatalf("probe: %v", err)
	}
	return calls
}

// openFailingAt opens root with a FileSystem that fails the n-th (0-based)
// mutating call after Open with an injected error, stored in *injected.
func openFailingAt(t *testing.T, root string, n int, injected *error) *dirvol.Store {
	t.Helper()
	h := &hookFS{FileSystem: dirvol.OS()}
	s := open(t, root, h)
	i := 0
	h.before = func(c call) error {
		defer func() { i++ }()
		if i == n {
			*injected = c.err()
			return *injected
		}
		return nil
	}
	return s
}

func labels(root string, calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.label(root)
	}
	return out
}

// createSteps are the create steps in order. The directory gets owner,
// mode and an attribute record in staging, and one fsync of the root after
// its rename makes all of it durable. A record file is durable (file and
// records directory synced) before the directory is renamed in, and synced
// after its own rename, so one journal commit covers its data and its name.
func createSteps(attr bool) []string {
	if attr {
		return []string{"MkdirTemp(staging)", "Lchown(staging)", "Chmod(staging)", "SetRecordAttr(staging)",
			"RenameNoReplace(staging→volume)", "SyncDir(root)"}
	}
	return []string{"MkdirTemp(staging)", "Lchown(staging)", "Chmod(staging)",
		"WriteFile(staging)", "Rename(staging→records)", "SyncFile(records)", "SyncDir(records)",
		"RenameNoReplace(staging→volume)", "SyncDir(root)"}
}

// deleteSteps are the delete steps in order: out of the pool and durable
// first, a record file after (renamed, not unlinked), data last.
func deleteSteps(attr bool) []string {
	if attr {
		return []string{"Rename(volume→trash)", "SyncDir(root)", "RemoveAll(trash)"}
	}
	return []string{"Rename(volume→trash)", "SyncDir(root)", "Rename(records→trash)", "RemoveAll(trash)", "Remove(trash)"}
}

func TestCreateFailsCleanlyAtEveryStep(t *testing.T) {
	sp := dirvol.Spec{Ownership: dirvol.Ownership{UID: os.Getuid(), GID: os.Getgid(), Mode: 0o750}, CapacityBytes: 1}
	inRecordForms(t, t.TempDir(), func(t *testing.T, base string) {
		testCreateFailsCleanlyAtEveryStep(t, sp, createSteps(attrForm(t.TempDir())))
	})
}

func testCreateFailsCleanlyAtEveryStep(t *testing.T, sp dirvol.Spec, steps []string) {
	const id = "pvc-f"
	probeRoot := filepath.Join(t.TempDir(), "probe")
	calls := probe(t, probeRoot, nil, func(s *dirvol.Store) error {
		_, _, err := s.Create(context.Background(), id, sp)
		return err
	})
	if got := labels(probeRoot, calls); !slices.Equal(got, steps) {
		t.Fatalf("create steps:\n got %q\nwant %q", got, steps)
	}
	moved := slices.Index(steps, "RenameNoReplace(staging→volume)")
	stepDesc := map[string]string{
		"WriteFile(staging)": "write record", "Rename(staging→records)": "write record", "SyncFile(records)": "write record", "SyncDir(records)": "write record",
		"SetRecordAttr(staging)": "write record",
		"MkdirTemp(staging)":     "make staging directory",
		"Lchown(staging)":        fmt.Sprintf("set owner %d:%d", os.Getuid(), os.Getgid()),
		"Chmod(staging)":         "set mode 0750", "RenameNoReplace(staging→volume)": "move into place",
		"SyncDir(root)": "sync root",
	}
	for i, step := range steps {
		t.Run(fmt.Sprintf("%d-%s", i, step), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			var injected error
			s := openFailingAt(t, root, i, &injected)
			_, created, err := s.Create(context.Background(), id, sp)
			desc := stepDesc[step]
			want := fmt.Sprintf("create volume %q: %s: %v", id, desc, injected)
			if err == nil || err.Error() != want || created {
				t.Fatalf("Create = created %v, %v\nwant error %s", created, err, want)
			}
			requirePrivateAreasEmpty(t, root)
			// Once the rename is done, the volume is complete; before it,
			// nothing of it may be left.
			complete := i > moved
			if exists(t, filepath.Join(root, id)) != complete || hasRecord(t, root, id) != complete {
				t.Errorf("after a failed %s: dir %v, meta %v; want both %v", step,
					exists(t, filepath.Join(root, id)), hasRecord(t, root, id), complete)
			}
			vol, created, err := open(t, root, nil).Create(context.Background(), id, sp)
			if err != nil || created == complete || !vol.HasMeta {
				t.Fatalf("retry: %+v created=%v err=%v", vol, created, err)
			}
			if mode, _, _ := stat(t, vol.Path); mode != os.ModeDir|0o750 {
				t.Errorf("mode after retry %s", mode)
			}
		})
	}
}

func TestDeleteFailsSafelyAtEveryStep(t *testing.T) {
	inRecordForms(t, t.TempDir(), func(t *testing.T, _ string) {
		testDeleteFailsSafelyAtEveryStep(t, deleteSteps(attrForm(t.TempDir())))
	})
}

func testDeleteFailsSafelyAtEveryStep(t *testing.T, deleteSteps []string) {
	const id = "pvc-g"
	setup := func(s *dirvol.Store) {
		vol := mustCreate(t, s, id, spec(0o750, 1))
		writeFile(t, filepath.Join(vol.Path, "data"), 100)
	}
	probeRoot := filepath.Join(t.TempDir(), "probe")
	calls := probe(t, probeRoot, setup, func(s *dirvol.Store) error {
		return s.Delete(context.Background(), id)
	})
	if got := labels(probeRoot, calls); !slices.Equal(got, deleteSteps) {
		t.Fatalf("delete steps:\n got %q\nwant %q", got, deleteSteps)
	}
	stepDesc := map[string]string{
		"Rename(volume→trash)": "move to trash", "SyncDir(root)": "sync root", "SyncDir(trash)": "sync trash",
		"Rename(records→trash)": "move record to trash",
		"RemoveAll(trash)":      "remove trash entry (Recover finishes it)", "Remove(trash)": "remove trash entry (Recover finishes it)",
	}
	for i, step := range deleteSteps {
		t.Run(fmt.Sprintf("%d-%s", i, step), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			setup(open(t, root, nil))
			var injected error
			err := openFailingAt(t, root, i, &injected).Delete(context.Background(), id)
			want := fmt.Sprintf("delete volume %q: %s: %v", id, stepDesc[step], injected)
			if err == nil || err.Error() != want {
				t.Fatalf("Delete = %v\nwant %s", err, want)
			}
			moved := i > 0
			if exists(t, filepath.Join(root, id)) == moved {
				t.Errorf("after a failed %s: volume present = %v, want %v", step, !moved, !moved)
			}
			if !moved && !exists(t, filepath.Join(root, id, "data")) {
				t.Error("a failed move to trash lost data")
			}
			s := open(t, root, nil)
			if err := s.Delete(context.Background(), id); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if _, err := s.Recover(context.Background()); err != nil {
				t.Fatal(err)
			}
			requirePrivateAreasEmpty(t, root)
			requireEmpty(t, filepath.Join(root, dirvol.RecordsDir))
			requireIDs(t, s)
		})
	}
}

func TestRecoverContinuesPastFailures(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	open(t, root, nil)
	for _, name := range []string{"a-1", "b-2"} {
		if err := os.Mkdir(filepath.Join(root, dirvol.TrashDir, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, dirvol.StagingDir, "create-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	var injected error
	h := &hookFS{FileSystem: dirvol.OS(), before: func(c call) error {
		if c.Op == "RemoveAll" && filepath.Base(c.Paths[0]) == "a-1" {
			injected = c.err()
			return injected
		}
		return nil
	}}
	rep, err := open(t, root, h).Recover(context.Background())
	if want := fmt.Sprintf("recover %s: %v", root, injected); err == nil || err.Error() != want {
		t.Errorf("Recover = %v, want %s", err, want)
	}
	if want := (dirvol.RecoverReport{FinishedDeletes: 1, RemovedStaging: 1}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	if got := names(t, filepath.Join(root, dirvol.TrashDir)); !slices.Equal(got, []string{"a-1"}) {
		t.Errorf("trash %q, want only the entry that failed", got)
	}
}

// Another process creating the same id between our check and our rename
// wins: we return its volume and leave no staging directory behind.
func TestCreateLosesRenameRace(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	h := &hookFS{FileSystem: dirvol.OS()}
	s := open(t, root, h)
	h.before = func(c call) error {
		if c.Op == "RenameNoReplace" {
			return os.Mkdir(c.Paths[1], 0o700)
		}
		return nil
	}
	vol, created, err := s.Create(context.Background(), "raced", spec(0o750, 1))
	if err != nil || created || vol.Path != filepath.Join(root, "raced") {
		t.Fatalf("Create = %+v created=%v err=%v; want the winner's volume", vol, created, err)
	}
	if mode, _, _ := stat(t, vol.Path); mode != os.ModeDir|0o700 {
		t.Errorf("mode %s: the winner's directory was replaced", mode)
	}
	requirePrivateAreasEmpty(t, root)
}

func TestRenameNoReplaceRefusesEmptyTarget(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := dirvol.OS().RenameNoReplace(src, dst)
	if !errors.Is(err, fs.ErrExist) || err.Error() != "renameat2 "+src+" "+dst+": file exists" {
		t.Errorf("RenameNoReplace onto an empty directory = %v, want file exists", err)
	}
	if !exists(t, src) {
		t.Error("source gone after a refused rename")
	}
}
