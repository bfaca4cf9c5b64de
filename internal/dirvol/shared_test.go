package dirvol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

const (
	sharedIDs, sharedRounds = 8, 60
	// envSharedChild makes the test binary a second node hammering the
	// shared pool at this root (see sharedChild).
	envSharedChild = "HPP_DIRVOL_SHARED_CHILD"
)

// hammer runs creates and deletes of the shared ids on s, each id in its
// own goroutine, and returns every failure.
func hammer(s *dirvol.Store, seed uint64) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range sharedIDs {
		id := fmt.Sprintf("pvc-%d", i)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), seed))
			for range sharedRounds {
				var err error
				if rng.IntN(2) == 0 {
					_, _, err = s.Create(context.Background(), id, spec(0o750, int64(i+1)))
				} else {
					err = s.Delete(context.Background(), id)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func sharedChild(root string) int {
	s, err := dirvol.Open(root, dirvol.Options{NodeID: "node-child", Shared: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shared child:", err)
		return 2
	}
	for _, err := range hammer(s, 99) {
		fmt.Fprintln(os.Stderr, "shared child:", err)
	}
	return 0
}

// Two nodes on one shared pool (two Stores with their own node ids on one
// directory, as two hpp-csi processes on an NFS export) hammer the same ids
// with creates and deletes at once. Every call succeeds, and afterwards
// every id is either a complete volume with its own record or entirely
// gone, with nothing left in staging, trash or the records directory.
func TestSharedPoolTwoNodesSameIDs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "shared")
	var wg sync.WaitGroup
	for n, node := range []string{"node-a.example.com", "node-b"} {
		s, err := dirvol.Open(root, dirvol.Options{NodeID: node, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for _, err := range hammer(s, uint64(n)) {
				t.Errorf("%s: %v", node, err)
			}
		})
	}
	wg.Wait()
	checkShared(t, root)
}

// The same with the second node a separate process: the cross-node lock is
// an fcntl lock on the pool's lock file, which other processes (and, over
// NFS, other machines) see.
func TestSharedPoolTwoProcessesSameIDs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "shared")
	s, err := dirvol.Open(root, dirvol.Options{NodeID: "node-parent", Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envSharedChild+"="+root)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, err := range hammer(s, 7) {
		t.Errorf("parent: %v", err)
	}
	if err := cmd.Wait(); err != nil || out.Len() > 0 {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	checkShared(t, root)
}

func checkShared(t *testing.T, root string) {
	t.Helper()
	ids := sharedIDs
	for i := range ids {
		id := fmt.Sprintf("pvc-%d", i)
		dir, rec := exists(t, filepath.Join(root, id)), hasRecord(t, root, id)
		if dir != rec {
			t.Errorf("%s: directory %v, record %v; want both or neither", id, dir, rec)
			continue
		}
		if !dir {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(metaRecord(t, root, id), &r); err != nil || r["id"] != id || r["capacityBytes"] != float64(i+1) {
			t.Errorf("%s: record %v (%v)", id, r, err)
		}
		if mode, _, _ := stat(t, filepath.Join(root, id)); mode != os.ModeDir|0o750 {
			t.Errorf("%s: mode %s", id, mode)
		}
	}
	requireEmpty(t, filepath.Join(root, dirvol.StagingDir))
	requireEmpty(t, filepath.Join(root, dirvol.TrashDir))
}

// Recover on one node of a shared pool leaves the other node's staging and
// trash entries alone (they may be a create or delete in flight there) and
// keeps a record whose create is in flight on the other node.
func TestSharedPoolRecoverLeavesOtherNodesEntries(t *testing.T) {
	root := filepath.Join(t.TempDir(), "shared")
	a, err := dirvol.Open(root, dirvol.Options{NodeID: "node-a", Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(root, dirvol.StagingDir, "node-b.create-1"),
		filepath.Join(root, dirvol.TrashDir, "node-b.XYZ"),
		filepath.Join(root, dirvol.StagingDir, "node-a.create-2"),
		filepath.Join(root, dirvol.TrashDir, "node-a.ABC"),
	} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Node b is between publishing the record of pvc-x and its directory
	// when node a recovers: a's orphan check waits for b's lock.
	inFlight := make(chan struct{})
	proceed := make(chan struct{})
	hb := &hookFS{FileSystem: dirvol.OS()}
	hb.before = func(c call) error {
		if c.Op == "RenameNoReplace" {
			close(inFlight)
			<-proceed
		}
		return nil
	}
	b, err := dirvol.Open(root, dirvol.Options{NodeID: "node-b", Shared: true, FS: hb})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := b.Create(context.Background(), "pvc-x", spec(0, 5)); done <- err }()
	<-inFlight
	recovered := make(chan dirvol.RecoverReport, 1)
	go func() {
		rep, err := a.Recover(context.Background())
		if err != nil {
			t.Error(err)
		}
		recovered <- rep
	}()
	close(proceed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rep := <-recovered
	if rep.RemovedOrphanMeta != 0 || rep.RemovedStaging != 1 || rep.FinishedDeletes != 1 {
		t.Errorf("Recover on node a = %+v; want only node a's staging and trash entries, no record", rep)
	}
	if !hasRecord(t, root, "pvc-x") || !exists(t, filepath.Join(root, "pvc-x")) {
		t.Error("node b's volume lost its record or directory to node a's Recover")
	}
	left := strings.Join(append(names(t, filepath.Join(root, dirvol.StagingDir)), names(t, filepath.Join(root, dirvol.TrashDir))...), ",")
	if left != "node-b.create-1,node-b.XYZ" {
		t.Errorf("staging and trash hold %q, want node b's entries only", left)
	}
}
