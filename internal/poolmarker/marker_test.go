package poolmarker

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestEnsureWritesOnceAndCheckAccepts(t *testing.T) {
	dir := t.TempDir()
	if err := Ensure(dir, Marker{Pool: "fast", Node: "a", CreatedBy: "test", ID: "0b6f2c1e-1d2a-4c3b-9e4f-5a6b7c8d9e0f"}); err != nil {
		t.Fatal(err)
	}
	// A second writer (another node of a shared pool) keeps the first's content.
	if err := Ensure(dir, Marker{Pool: "fast", Node: "b"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ".hpp-pool"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"hpp-pool","version":1,"pool":"fast","createdBy":"test","node":"a","id":"0b6f2c1e-1d2a-4c3b-9e4f-5a6b7c8d9e0f"}` + "\n"
	if string(data) != want {
		t.Errorf("marker = %q, want %q", data, want)
	}
	for _, pool := range []string{"fast", ""} {
		if err := Check(dir, pool); err != nil {
			t.Errorf("Check(%q) = %v", pool, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
}

func TestCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".hpp-pool")
	err := Check(dir, "fast")
	var me *MissingError
	if !errors.As(err, &me) || err.Error() != "marker "+p+" is missing" {
		t.Errorf("missing: %v", err)
	}
	if err := os.WriteFile(p, []byte(`{"kind":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "marker " + p + ` is not an hpp pool marker (want JSON with "kind":"hpp-pool")`
	if err := Check(dir, "fast"); err == nil || err.Error() != want {
		t.Errorf("foreign: %v, want %s", err, want)
	}
	// Not ours: never overwritten.
	if err := Ensure(dir, Marker{Pool: "fast"}); err == nil || err.Error() != want {
		t.Errorf("Ensure over a foreign file: %v, want %s", err, want)
	}
	if err := os.WriteFile(p, []byte(`{"kind":"hpp-pool","version":1,"pool":"slow"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	want = "marker " + p + ` belongs to pool "slow", not "fast": another pool's storage is mounted here`
	if err := Check(dir, "fast"); err == nil || err.Error() != want {
		t.Errorf("other pool: %v, want %s", err, want)
	}
}

func TestEnsureGivesANewMarkerAnIdentityAndKeepsTheFirst(t *testing.T) {
	dir := t.TempDir()
	if err := Ensure(dir, Marker{Pool: "fast"}); err != nil {
		t.Fatal(err)
	}
	first, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !uuidRE.MatchString(first.ID) {
		t.Fatalf("marker ID %q is not a version 4 UUID", first.ID)
	}
	if err := Ensure(dir, Marker{Pool: "fast", ID: "other"}); err != nil {
		t.Fatal(err)
	}
	if again, _ := Read(dir); again.ID != first.ID {
		t.Errorf("a second Ensure changed the identity: %q, was %q", again.ID, first.ID)
	}
	// A new disk at the same path: a new marker, a new identity.
	if err := os.Remove(Path(dir)); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(dir, Marker{Pool: "fast"}); err != nil {
		t.Fatal(err)
	}
	if fresh, _ := Read(dir); fresh.ID == first.ID || !uuidRE.MatchString(fresh.ID) {
		t.Errorf("recreated marker ID %q, want a new UUID (was %q)", fresh.ID, first.ID)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, Name+".tmp-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
