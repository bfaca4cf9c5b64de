package dirvol_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Deletes return before their data is gone; the purge queue then removes
// every trash entry (data and meta), one at a time, and logs each.
func TestBackgroundPurgeEmptiesTrashOneAtATime(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	var inFlight, most atomic.Int32
	h := &hookFS{FileSystem: dirvol.OS()}
	h.before = func(c call) error {
		if c.Op == "RemoveAll" {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond) // long enough to overlap if purges ran in parallel
		}
		return nil
	}
	h.after = func(c call) {
		if c.Op == "RemoveAll" {
			inFlight.Add(-1)
		}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	s, err := dirvol.Open(root, dirvol.Options{FS: h, Logger: zap.New(core), PurgeInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"pvc-a", "pvc-b", "pvc-c"}
	for _, id := range ids {
		writeFile(t, filepath.Join(mustCreate(t, s, id, spec(0o750, 1)).Path, "data"), 100)
	}
	for _, id := range ids {
		if err := s.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if exists(t, filepath.Join(root, id)) || hasRecord(t, root, id) {
			t.Fatalf("after Delete(%s) the volume or its meta file is still in place", id)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(names(t, filepath.Join(root, dirvol.TrashDir))) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("trash never emptied: %v", names(t, filepath.Join(root, dirvol.TrashDir)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	requireEmpty(t, filepath.Join(root, dirvol.RecordsDir))
	if m := most.Load(); m != 1 {
		t.Errorf("%d purges ran at once, want 1", m)
	}
	var purged []string
	for time.Now().Before(deadline) {
		purged = purged[:0]
		for _, e := range logs.FilterMessage("deleted volume purged").All() {
			purged = append(purged, fmt.Sprint(e.ContextMap()["id"]))
		}
		if len(purged) == len(ids) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(purged, ids) {
		t.Errorf("purge log lines for %q, want %q in order", purged, ids)
	}
}

// Recover with PurgeInBackground hands trash left by a crash to the purge
// queue and returns before any of it is removed, so a restart after deleting
// large volumes serves at once; the queue then empties trash.
func TestRecoverQueuesTrashForBackgroundPurge(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	release := make(chan struct{})
	h := &hookFS{FileSystem: dirvol.OS()}
	h.before = func(c call) error {
		if c.Op == "RemoveAll" {
			<-release // the purge cannot finish until the test says so
		}
		return nil
	}
	plain, err := dirvol.Open(root, dirvol.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// What a crash between the rename into trash and the purge leaves.
	for _, id := range []string{"pvc-a", "pvc-b"} {
		writeFile(t, filepath.Join(mustCreate(t, plain, id, spec(0o750, 1)).Path, "data"), 100)
		if err := os.Rename(filepath.Join(root, id), filepath.Join(root, dirvol.TrashDir, id+"-crashed")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := dirvol.Open(root, dirvol.Options{FS: h, PurgeInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.FinishedDeletes != 2 {
		t.Fatalf("Recover queued %d trash entries, want 2", rep.FinishedDeletes)
	}
	// Recover returned while every removal is still blocked.
	if got := names(t, filepath.Join(root, dirvol.TrashDir)); len(got) != 2 {
		t.Fatalf("trash after Recover = %v, want both entries still there", got)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for len(names(t, filepath.Join(root, dirvol.TrashDir))) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("trash never emptied: %v", names(t, filepath.Join(root, dirvol.TrashDir)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
