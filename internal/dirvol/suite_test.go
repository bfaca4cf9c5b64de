package dirvol_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// behaviourSuite is the real-filesystem behaviour of a Store and DirUsage.
// Unit tests run it on the test's temp dir; node tests on tmpfs and XFS.
// base is a directory on the filesystem under test; each case gets a fresh
// root below it.
func behaviourSuite(t *testing.T, base string) {
	n := 0
	newRoot := func(t *testing.T) string {
		n++
		return filepath.Join(base, fmt.Sprintf("case%02d", n), "pool", "csi")
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, root string)
	}{
		{"OpenCreatesRootAndPrivateAreas", testOpenCreatesRoot},
		{"CreateAppliesModeDespiteUmask", testCreateMode},
		{"CreateChownsAsRoot", testCreateChown},
		{"CreateRecordsMeta", testCreateMeta},
		{"CreateIsIdempotentAndKeepsFirstMeta", testCreateIdempotent},
		{"CreateRefusesNonDirectory", testCreateNonDirectory},
		{"CreateRefusesSymlinkedID", testCreateSymlink},
		{"GetMissingAndWithoutMeta", testGet},
		{"ListOnlyVolumes", testList},
		{"DeleteTwice", testDeleteTwice},
		{"DeleteDropsStaleMeta", testDeleteStaleMeta},
		{"RecoverCleansLeftovers", testRecover},
		{"LongIDRecord", testLongID},
		{"SetAttributeRewritesRecord", testSetAttribute},
		{"RecoverMigratesEarlierRecords", testMigrateOldRecords},
		{"RecoverMovesRecordFilesIntoAttributes", testRecordFilesToAttrs},
		{"UsageOfKnownContent", testUsageKnown},
		{"UsageCountsHardLinksOnce", testUsageHardLink},
		{"UsageDoesNotFollowSymlinks", testUsageSymlink},
		{"UsageStopsWhenCancelled", testUsageCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newRoot(t)) })
	}
}

func testOpenCreatesRoot(t *testing.T, root string) {
	s := open(t, root, nil)
	if s.Root() != root {
		t.Errorf("Root() = %q, want %q", s.Root(), root)
	}
	if mode, _, _ := stat(t, root); mode != os.ModeDir|0o755 {
		t.Errorf("root mode %s, want drwxr-xr-x", mode)
	}
	for _, name := range []string{dirvol.StagingDir, dirvol.TrashDir, dirvol.RecordsDir} {
		if mode, _, _ := stat(t, filepath.Join(root, name)); mode != os.ModeDir|0o700 {
			t.Errorf("%s mode %s, want drwx------", name, mode)
		}
	}
	// Opening again is harmless and keeps volumes.
	mustCreate(t, s, "v1", spec(0o750, 1))
	requireIDs(t, open(t, root, nil), "v1")
}

func testCreateMode(t *testing.T, root string) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	s := open(t, root, nil)
	modes := map[string]os.FileMode{"default": 0, "m777": 0o777, "m750": 0o750, "m700": 0o700}
	if os.Geteuid() == 0 {
		// Moving a directory to another parent rewrites its "..", which
		// needs write permission on it: only root (as hpp runs) can move
		// a read-only one into place.
		modes["m555"] = 0o555
	}
	for id, mode := range modes {
		vol := mustCreate(t, s, id, spec(mode, 0))
		want := mode
		if mode == 0 {
			want = dirvol.DefaultMode
		}
		if got, _, _ := stat(t, vol.Path); got != os.ModeDir|want {
			t.Errorf("%s: mode %s, want %s (umask 077 must not narrow it)", id, got, os.ModeDir|want)
		}
		if vol.Path != filepath.Join(root, id) {
			t.Errorf("%s: path %q, want %q", id, vol.Path, filepath.Join(root, id))
		}
	}
	requirePrivateAreasEmpty(t, root)
}

func testCreateChown(t *testing.T, root string) {
	testutil.RequireRoot(t)
	s := open(t, root, nil)
	sp := dirvol.Spec{Ownership: dirvol.Ownership{UID: 1000, GID: 2000, Mode: 0o770}}
	vol := mustCreate(t, s, "owned", sp)
	mode, uid, gid := stat(t, vol.Path)
	if uid != 1000 || gid != 2000 || mode != os.ModeDir|0o770 {
		t.Errorf("owner %d:%d mode %s, want 1000:2000 drwxrwx---", uid, gid, mode)
	}
	// Only the group: the owner stays the process's.
	vol = mustCreate(t, s, "group-only", dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: 2000}})
	if _, uid, gid := stat(t, vol.Path); uid != uint32(os.Geteuid()) || gid != 2000 {
		t.Errorf("group-only: owner %d:%d, want %d:2000", uid, gid, os.Geteuid())
	}
	m := readMeta(t, root, "owned")
	if m["uid"] != 1000.0 || m["gid"] != 2000.0 || m["mode"] != "0770" {
		t.Errorf("meta ownership uid=%v gid=%v mode=%v, want 1000 2000 0770", m["uid"], m["gid"], m["mode"])
	}
}

func testCreateMeta(t *testing.T, root string) {
	s := open(t, root, nil)
	before := time.Now().UTC()
	sp := spec(0o750, 5<<30)
	sp.Kind = dirvol.KindEphemeral
	sp.Attributes = map[string]string{"pod": "uid-1"}
	vol := mustCreate(t, s, "pvc-1", sp)
	after := time.Now().UTC()
	if !vol.HasMeta || vol.CapacityBytes != 5<<30 || vol.Kind != dirvol.KindEphemeral || vol.Attributes["pod"] != "uid-1" {
		t.Errorf("Create returned %+v", vol)
	}
	if vol.Created.Before(before) || vol.Created.After(after) {
		t.Errorf("Created %v not within [%v, %v]", vol.Created, before, after)
	}
	// The record is the directory's trusted attribute, or a plain file
	// that only root reads.
	if attrForm(root) {
		if exists(t, metaPath(root, "pvc-1")) {
			t.Error("record of pvc-1 written as a file too")
		}
	} else if fi, err := os.Lstat(metaPath(root, "pvc-1")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("record of pvc-1: %v %v, want a regular file with mode 0600", fi, err)
	}
	m := readMeta(t, root, "pvc-1")
	want := map[string]any{
		"formatVersion": 1.0, "id": "pvc-1", "kind": "ephemeral", "capacityBytes": float64(5 << 30),
		"uid": -1.0, "gid": -1.0, "mode": "0750", "attributes": map[string]any{"pod": "uid-1"},
	}
	for k, v := range want {
		if got := m[k]; !equalJSON(got, v) {
			t.Errorf("meta %s = %v, want %v", k, got, v)
		}
	}
	if created, err := time.Parse(time.RFC3339Nano, m["created"].(string)); err != nil || !created.Equal(vol.Created) {
		t.Errorf("meta created %v (%v), want %v", m["created"], err, vol.Created)
	}
	got, err := s.Get(context.Background(), "pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Path != vol.Path || !got.Created.Equal(vol.Created) || got.CapacityBytes != vol.CapacityBytes || got.Kind != vol.Kind || !got.HasMeta {
		t.Errorf("Get = %+v, want %+v", got, vol)
	}
	// The default kind is persistent.
	if vol := mustCreate(t, s, "pvc-2", spec(0, 0)); vol.Kind != dirvol.KindPersistent {
		t.Errorf("default kind %q, want %q", vol.Kind, dirvol.KindPersistent)
	}
}

func equalJSON(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		if len(am) != len(bm) {
			return false
		}
		for k := range am {
			if am[k] != bm[k] {
				return false
			}
		}
		return true
	}
	return a == b
}

func testCreateIdempotent(t *testing.T, root string) {
	s := open(t, root, nil)
	first := mustCreate(t, s, "pvc-x", spec(0o750, 1<<30))
	metaBefore := metaRecord(t, root, "pvc-x")
	writeFile(t, filepath.Join(first.Path, "data"), 10)

	again, created, err := s.Create(context.Background(), "pvc-x", spec(0o700, 2<<30))
	if err != nil || created {
		t.Fatalf("second Create: created=%v err=%v, want false nil", created, err)
	}
	if again.Path != first.Path || again.CapacityBytes != 1<<30 || !again.Created.Equal(first.Created) {
		t.Errorf("second Create = %+v, want the first volume %+v", again, first)
	}
	metaAfter := metaRecord(t, root, "pvc-x")
	if !bytes.Equal(metaBefore, metaAfter) {
		t.Errorf("meta changed by the second Create:\n%s\n---\n%s", metaBefore, metaAfter)
	}
	if mode, _, _ := stat(t, first.Path); mode != os.ModeDir|0o750 {
		t.Errorf("mode %s after second Create, want drwxr-x---", mode)
	}
	if !exists(t, filepath.Join(first.Path, "data")) {
		t.Error("second Create lost the volume's data")
	}
	requirePrivateAreasEmpty(t, root)
}

func testCreateNonDirectory(t *testing.T, root string) {
	s := open(t, root, nil)
	p := filepath.Join(root, "afile")
	writeFile(t, p, 1)
	_, _, err := s.Create(context.Background(), "afile", spec(0, 0))
	want := `create volume "afile": ` + p + " exists and is not a directory (mode -rw-r--r--)"
	if err == nil || err.Error() != want {
		t.Errorf("Create over a file: %v, want %s", err, want)
	}
	requirePrivateAreasEmpty(t, root)
	if hasRecord(t, root, "afile") {
		t.Error("meta written for a refused create")
	}
}

func testCreateSymlink(t *testing.T, root string) {
	s := open(t, root, nil)
	outside := filepath.Join(filepath.Dir(root), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"Create": func() error { _, _, err := s.Create(context.Background(), "evil", spec(0, 0)); return err },
		"Get":    func() error { _, err := s.Get(context.Background(), "evil"); return err },
		"Delete": func() error { return s.Delete(context.Background(), "evil") },
	} {
		err := op()
		if err == nil || !strings.HasPrefix(err.Error(), `volume id: "evil" is a symbolic link that resolves outside the pool`) {
			t.Errorf("%s through a symlink: %v", name, err)
		}
	}
	if !exists(t, outside) {
		t.Error("the symlink's target was removed")
	}
	requireIDs(t, s)
}

func testGet(t *testing.T, root string) {
	s := open(t, root, nil)
	_, err := s.Get(context.Background(), "nope")
	if !errors.Is(err, dirvol.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	if want := `get volume "nope": ` + filepath.Join(root, "nope") + ": volume not found"; err == nil || err.Error() != want {
		t.Errorf("Get(missing) = %v, want %s", err, want)
	}
	// A directory made by the old KubeVirt provisioner has no meta file.
	if err := os.Mkdir(filepath.Join(root, "pvc-old"), 0o777); err != nil {
		t.Fatal(err)
	}
	vol, err := s.Get(context.Background(), "pvc-old")
	if err != nil {
		t.Fatal(err)
	}
	want := dirvol.Volume{ID: "pvc-old", Path: filepath.Join(root, "pvc-old")}
	if vol.ID != want.ID || vol.Path != want.Path || vol.HasMeta || vol.CapacityBytes != 0 || vol.Kind != "" || !vol.Created.IsZero() {
		t.Errorf("Get(no meta) = %+v, want %+v", vol, want)
	}
	// Create of such a directory returns it, without writing a meta file.
	vol, created, err := s.Create(context.Background(), "pvc-old", spec(0o700, 7))
	if err != nil || created || vol.HasMeta {
		t.Errorf("Create(existing without meta) = %+v %v %v", vol, created, err)
	}
	if hasRecord(t, root, "pvc-old") {
		t.Error("Create wrote meta for an existing directory")
	}
}

func testList(t *testing.T, root string) {
	s := open(t, root, nil)
	requireIDs(t, s)
	for _, id := range []string{"pvc-b", "pvc-a", "c"} {
		mustCreate(t, s, id, spec(0, 1))
	}
	for _, d := range []string{"lost+found", "csi", ".hidden", "bad name"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "file"), 1)
	if err := os.Symlink(filepath.Join(root, "pvc-a"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	// Leftovers in the private areas are not volumes either.
	if err := os.Mkdir(filepath.Join(root, dirvol.StagingDir, "pvc-z"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, dirvol.TrashDir, "pvc-y"), 0o700); err != nil {
		t.Fatal(err)
	}
	requireIDs(t, s, "c", "pvc-a", "pvc-b")
}

func testDeleteTwice(t *testing.T, root string) {
	s := open(t, root, nil)
	vol := mustCreate(t, s, "pvc-d", spec(0o750, 1))
	if err := os.MkdirAll(filepath.Join(vol.Path, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vol.Path, "a", "b", "f"), 4096)
	if err := os.Chmod(filepath.Join(vol.Path, "a", "b", "f"), 0o400); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// What a pod may leave behind; only root can remove into it.
		if err := os.Chmod(filepath.Join(vol.Path, "a"), 0o500); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, s, "keep", spec(0, 1))
	for i := range 2 {
		if err := s.Delete(context.Background(), "pvc-d"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if exists(t, vol.Path) || hasRecord(t, root, "pvc-d") {
		t.Error("volume or meta still there after Delete")
	}
	requirePrivateAreasEmpty(t, root)
	requireIDs(t, s, "keep")
	if _, err := s.Get(context.Background(), "pvc-d"); !errors.Is(err, dirvol.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	// The id can be used again.
	mustCreate(t, s, "pvc-d", spec(0, 2))
}

func testDeleteStaleMeta(t *testing.T, root string) {
	s := open(t, root, nil)
	mustCreate(t, s, "pvc-s", spec(0, 1))
	if err := os.Remove(filepath.Join(root, "pvc-s")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), "pvc-s"); err != nil {
		t.Fatal(err)
	}
	if hasRecord(t, root, "pvc-s") {
		t.Error("stale meta left by Delete of a missing volume")
	}
}

func testRecover(t *testing.T, root string) {
	s := open(t, root, nil)
	mustCreate(t, s, "live", spec(0, 1))
	mustCreate(t, s, "orphan", spec(0, 1))
	if err := os.Remove(filepath.Join(root, "orphan")); err != nil {
		t.Fatal(err)
	}
	trash := filepath.Join(root, dirvol.TrashDir, "gone-123")
	if err := os.MkdirAll(filepath.Join(trash, "deep", "er"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(trash, "deep", "f"), 100)
	if err := os.Mkdir(filepath.Join(root, dirvol.StagingDir, "create-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, dirvol.StagingDir, "local.rec-1"), 10)
	writeFile(t, filepath.Join(root, dirvol.RecordsDir, ".README"), 10)

	rep, err := open(t, root, nil).Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// An attribute record went with its directory: no orphan to drop.
	want, wantRecords := dirvol.RecoverReport{FinishedDeletes: 1, RemovedStaging: 2, RemovedOrphanMeta: 1}, ".README,live"
	if attrForm(root) {
		want.RemovedOrphanMeta, wantRecords = 0, ".README"
	}
	if rep != want {
		t.Errorf("Recover = %+v, want %+v", rep, want)
	}
	requirePrivateAreasEmpty(t, root)
	if got := names(t, filepath.Join(root, dirvol.RecordsDir)); strings.Join(got, ",") != wantRecords {
		t.Errorf("records directory after Recover: %q, want %s (.README is not an id: foreign, left alone)", got, wantRecords)
	}
	rep, err = s.Recover(context.Background())
	if err != nil || rep != (dirvol.RecoverReport{}) {
		t.Errorf("second Recover = %+v, %v; want nothing to do", rep, err)
	}
}

func testLongID(t *testing.T, root string) {
	s := open(t, root, nil)
	id := strings.Repeat("x", 255)
	vol := mustCreate(t, s, id, spec(0, 3))
	if !hasRecord(t, root, id) {
		t.Error("no record of a 255-byte id")
	}
	if got := names(t, filepath.Join(root, dirvol.RecordsDir)); !attrForm(root) && (len(got) != 1 || got[0] != id) {
		t.Errorf("record file of a 255-byte id: %q, want one named by the id", got)
	}
	got, err := s.Get(context.Background(), id)
	if err != nil || got.CapacityBytes != 3 || !got.HasMeta {
		t.Errorf("Get(long id) = %+v, %v", got, err)
	}
	// Recover recognises the record as belonging to a live volume.
	if rep, err := s.Recover(context.Background()); err != nil || rep.RemovedOrphanMeta != 0 {
		t.Errorf("Recover with a live long id: %+v, %v", rep, err)
	}
	if err := os.Remove(vol.Path); err != nil {
		t.Fatal(err)
	}
	orphans := 1
	if attrForm(root) {
		orphans = 0 // the record went with the directory
	}
	if rep, err := s.Recover(context.Background()); err != nil || rep.RemovedOrphanMeta != orphans {
		t.Errorf("Recover after the long-id directory was removed: %+v, %v; want %d orphan records", rep, err, orphans)
	}
	mustCreate(t, s, id, spec(0, 3))
	if err := s.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	requireEmpty(t, filepath.Join(root, dirvol.RecordsDir))
	requirePrivateAreasEmpty(t, root)
}

// Pools written by earlier versions keep working: every shape of their
// records (a file, an inline symbolic link, a hashed name for a long id) is
// rewritten in the Store's form by Recover; orphans go, foreign files stay.
func testMigrateOldRecords(t *testing.T, root string) {
	s := open(t, root, nil)
	long := strings.Repeat("y", 255)
	for _, id := range []string{"pvc-file", "pvc-link", long, "pvc-eph"} {
		if err := os.Mkdir(filepath.Join(root, id), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	oldDir := filepath.Join(root, dirvol.OldMetaDir)
	if err := os.Mkdir(oldDir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := func(id, kind string, capacity int64) string {
		return fmt.Sprintf(`{"formatVersion":1,"id":%q,"kind":%q,"capacityBytes":%d,"created":"2025-01-02T03:04:05Z","uid":-1,"gid":-1,"mode":"0750"}`, id, kind, capacity)
	}
	writeOld := func(name, data string) {
		if err := os.WriteFile(filepath.Join(oldDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeOld("pvc-file.json", rec("pvc-file", "persistent", 11))
	if err := os.Symlink(rec("pvc-link", "persistent", 22), filepath.Join(oldDir, "pvc-link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rec("pvc-eph", "ephemeral", 0), filepath.Join(oldDir, "pvc-eph.json")); err != nil {
		t.Fatal(err)
	}
	writeOld(".sha256-0123.json", rec(long, "persistent", 33))
	writeOld("pvc-orphan.json", rec("pvc-orphan", "persistent", 44))
	writeOld("notes.txt", "foreign")

	rep, err := s.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.MigratedRecords != 4 {
		t.Errorf("Recover migrated %d records, want 4 (report %+v)", rep.MigratedRecords, rep)
	}
	for id, want := range map[string]struct {
		kind     string
		capacity int64
	}{"pvc-file": {"persistent", 11}, "pvc-link": {"persistent", 22}, long: {"persistent", 33}, "pvc-eph": {"ephemeral", 0}} {
		vol, err := s.Get(context.Background(), id)
		if err != nil || !vol.HasMeta || vol.Kind != want.kind || vol.CapacityBytes != want.capacity {
			t.Errorf("Get(%.20s) after migration = %+v, %v; want kind %s capacity %d", id, vol, err, want.kind, want.capacity)
		}
		if !hasRecord(t, root, id) || attrForm(root) == exists(t, metaPath(root, id)) {
			t.Errorf("record of %.20s: not in the Store's current form", id)
		}
	}
	if hasRecord(t, root, "pvc-orphan") {
		t.Error("orphan oldDir record migrated")
	}
	if got := names(t, oldDir); !slices.Equal(got, []string{"notes.txt"}) {
		t.Errorf("oldDir meta directory holds %q, want only the foreign notes.txt", got)
	}
	if got := s.Reserved(); got != 11+22+33 {
		t.Errorf("Reserved() = %d after migration, want %d", got, 11+22+33)
	}
}

// A pool whose records an earlier version kept as files, opened where
// records can be attributes: Recover moves each live volume's record into
// its directory and removes the file; an orphan file is dropped.
func testRecordFilesToAttrs(t *testing.T, root string) {
	if !attrForm(filepath.Dir(root)) {
		t.Skip("only where records are attributes")
	}
	t.Setenv(envRecordsInFiles, "1")
	old := open(t, root, nil)
	mustCreate(t, old, "pvc-a", spec(0, 7))
	mustCreate(t, old, "pvc-gone", spec(0, 8))
	if err := os.Remove(filepath.Join(root, "pvc-gone")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envRecordsInFiles, "")
	s := open(t, root, nil)
	rep, err := s.Recover(context.Background())
	if err != nil || rep.MigratedRecords != 1 || rep.RemovedOrphanMeta != 1 {
		t.Errorf("Recover = %+v, %v; want 1 record moved and 1 orphan dropped", rep, err)
	}
	requireEmpty(t, filepath.Join(root, dirvol.RecordsDir))
	if m := readMeta(t, root, "pvc-a"); m["id"] != "pvc-a" || m["capacityBytes"] != 7.0 {
		t.Errorf("record attribute after the move: %v", m)
	}
	if vol, err := s.Get(context.Background(), "pvc-a"); err != nil || vol.CapacityBytes != 7 || s.Reserved() != 7 {
		t.Errorf("Get = %+v, %v; Reserved %d; want the moved record", vol, err, s.Reserved())
	}
}
