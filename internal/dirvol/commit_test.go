package dirvol_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// syncWitness records, for every fsync of the root, which volumes existed
// when it began: a call is durable only if a sync that began after its
// rename finished before it returned.
type syncWitness struct {
	mu    sync.Mutex
	syncs []map[string]bool // volumes present at the start of each finished sync
	count map[string]int    // SyncDir calls per area
}

func (w *syncWitness) hook(root string) *hookFS {
	w.count = map[string]int{}
	h := &hookFS{FileSystem: dirvol.OS()}
	h.before = func(c call) error {
		if c.Op != "SyncDir" {
			return nil
		}
		w.mu.Lock()
		w.count[area(root, c.Paths[0])]++
		w.mu.Unlock()
		if area(root, c.Paths[0]) != "root" {
			return nil
		}
		seen := map[string]bool{}
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			seen[e.Name()] = true
		}
		time.Sleep(2 * time.Millisecond) // a slow disk, so that callers pile up
		w.mu.Lock()
		w.syncs = append(w.syncs, seen)
		w.mu.Unlock()
		return nil
	}
	return h
}

func (w *syncWitness) covered(id string, present bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, seen := range w.syncs {
		if seen[id] == present {
			return true
		}
	}
	return false
}

// Concurrent creates and deletes share the root's fsync, and none returns
// before an fsync that began after its own rename has finished.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	const callers = 16
	root := filepath.Join(t.TempDir(), "root")
	w := &syncWitness{}
	s := open(t, root, w.hook(root))
	w.mu.Lock()
	w.count, w.syncs = map[string]int{}, nil
	w.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			id := fmt.Sprintf("pvc-%02d", i)
			if _, _, err := s.Create(context.Background(), id, spec(0o750, 1)); err != nil {
				errs <- err
				return
			}
			if !w.covered(id, true) {
				errs <- fmt.Errorf("Create(%s) returned before a root fsync covered it", id)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := w.count["root"]; n >= callers || n < 1 {
		t.Errorf("%d concurrent creates made %d root fsyncs; want them shared (fewer than %d)", callers, n, callers)
	}
	t.Logf("%d concurrent creates: %d root fsyncs, %d records fsyncs", callers, w.count["root"], w.count["records"])

	// Deletes: a volume gone from a root fsync's view is durable.
	w.mu.Lock()
	w.count, w.syncs = map[string]int{}, nil
	w.mu.Unlock()
	errs = make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			id := fmt.Sprintf("pvc-%02d", i)
			if err := s.Delete(context.Background(), id); err != nil {
				errs <- err
				return
			}
			if !w.covered(id, false) {
				errs <- fmt.Errorf("Delete(%s) returned before a root fsync covered it", id)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := w.count["root"]; n >= callers {
		t.Errorf("%d concurrent deletes made %d root fsyncs; want them shared", callers, n)
	}
	requireIDs(t, s)
}

// A lone caller pays one fsync per step, no more.
func TestSingleCallerFsyncs(t *testing.T) {
	inRecordForms(t, t.TempDir(), testSingleCallerFsyncs)
}

func testSingleCallerFsyncs(t *testing.T, base string) {
	root := filepath.Join(base, "root")
	w := &syncWitness{}
	s := open(t, root, w.hook(root))
	w.count = map[string]int{}
	mustCreate(t, s, "pvc-1", spec(0, 1))
	want := map[string]int{"root": 1, "records": 1}
	if attrForm(root) {
		want = map[string]int{"root": 1} // the attribute is durable with the rename
	}
	if !maps.Equal(w.count, want) {
		t.Errorf("one Create made %v directory fsyncs; want %v", w.count, want)
	}
	w.count = map[string]int{}
	if err := s.Delete(context.Background(), "pvc-1"); err != nil {
		t.Fatal(err)
	}
	if w.count["root"] != 1 || len(w.count) != 1 {
		t.Errorf("one Delete made %v directory fsyncs; want root 1 only", w.count)
	}
}

// A failed fsync fails every caller it was to cover, and the next batch
// starts afresh.
func TestGroupCommitReportsTheFailure(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	h := &hookFS{FileSystem: dirvol.OS()}
	s := open(t, root, h)
	var fail sync.Once
	h.before = func(c call) error {
		if c.Op == "SyncDir" && area(root, c.Paths[0]) == "root" {
			var err error
			fail.Do(func() { err = c.err() })
			return err
		}
		return nil
	}
	_, _, err := s.Create(context.Background(), "pvc-a", spec(0, 1))
	if want := `create volume "pvc-a": sync root: syncdir ` + root + ": injected fault"; err == nil || err.Error() != want {
		t.Fatalf("Create with a failing fsync = %v, want %s", err, want)
	}
	mustCreate(t, s, "pvc-b", spec(0, 1))
	// The first volume is complete on disk; a retry finds it.
	if _, created, err := s.Create(context.Background(), "pvc-a", spec(0, 1)); err != nil || created {
		t.Errorf("retry after a failed fsync: created=%v err=%v", created, err)
	}
}

func TestReservedFollowsCreatesDeletesAndUsage(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	s := open(t, root, nil)
	mustCreate(t, s, "a", spec(0, 100))
	mustCreate(t, s, "b", spec(0, 50))
	mustCreate(t, s, "c", spec(0, 0))
	if got := s.Reserved(); got != 150 {
		t.Errorf("Reserved = %d, want 150", got)
	}
	s.NoteUsage("a", 30)
	s.NoteUsage("b", 80) // wrote more than it asked for: reserves nothing
	s.NoteUsage("nope", 1)
	if got := s.Reserved(); got != 70 {
		t.Errorf("Reserved after usage = %d, want 70", got)
	}
	if err := s.Delete(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := s.Reserved(); got != 0 {
		t.Errorf("Reserved after Delete = %d, want 0", got)
	}
	// Rebuilt from the records at the next start.
	s2 := open(t, root, nil)
	if _, err := s2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s2.Reserved(); got != 50 {
		t.Errorf("Reserved after Recover = %d, want 50", got)
	}
}

// After a crash with large deleted volumes in trash, Recover returns at
// once and the background purge removes them afterwards.
func TestRecoverLeavesTrashToTheBackgroundPurge(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	s := open(t, root, nil)
	for _, id := range []string{"vm-1", "vm-2"} {
		writeFile(t, filepath.Join(mustCreate(t, s, id, spec(0, 1)).Path, "disk.img"), 1<<20)
		if err := os.Rename(filepath.Join(root, id), filepath.Join(root, dirvol.TrashDir, "local."+id)); err != nil {
			t.Fatal(err) // what a crash right after Delete's rename leaves
		}
	}
	release := make(chan struct{})
	h := &hookFS{FileSystem: dirvol.OS(), before: func(c call) error {
		if c.Op == "RemoveAll" && area(root, c.Paths[0]) == "trash" {
			<-release // the purge is slow: Recover must not wait for it
		}
		return nil
	}}
	bg, err := dirvol.Open(root, dirvol.Options{FS: h, PurgeInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bg.Recover(context.Background())
	if err != nil || rep.FinishedDeletes != 2 {
		t.Fatalf("Recover = %+v, %v; want 2 trash entries handed to the purge", rep, err)
	}
	if n := len(names(t, filepath.Join(root, dirvol.TrashDir))); n != 2 {
		t.Fatalf("trash holds %d entries when Recover returned; the purge had not run yet, want 2", n)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for len(names(t, filepath.Join(root, dirvol.TrashDir))) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("trash never emptied: %v", names(t, filepath.Join(root, dirvol.TrashDir)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	requireEmpty(t, filepath.Join(root, dirvol.RecordsDir))
}
