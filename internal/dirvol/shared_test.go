package dirvol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Two nodes on one shared pool (two Stores with their own node ids on one
// directory, as two hpp-csi processes on an NFS export) hammer the same ids
// with creates and deletes at once. Every call succeeds, and afterwards
// every id is either a complete volume with its own record or entirely
// gone, with nothing left in staging, trash or the records directory.
func TestSharedPoolTwoNodesSameIDs(t *testing.T) {
	const ids, rounds = 8, 60
	root := filepath.Join(t.TempDir(), "shared")
	nodes := map[string]*dirvol.Store{}
	for _, node := range []string{"node-a.example.com", "node-b"} {
		s, err := dirvol.Open(root, dirvol.Options{NodeID: node, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		nodes[node] = s
	}
	var wg sync.WaitGroup
	for node, s := range nodes {
		for i := range ids {
			id := fmt.Sprintf("pvc-%d", i)
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(len(node))))
				for range rounds {
					var err error
					if rng.IntN(2) == 0 {
						_, _, err = s.Create(context.Background(), id, spec(0o750, int64(i+1)))
					} else {
						err = s.Delete(context.Background(), id)
					}
					if err != nil {
						t.Errorf("%s on %s: %v", id, node, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for i := range ids {
		id := fmt.Sprintf("pvc-%d", i)
		dir, rec := exists(t, filepath.Join(root, id)), exists(t, metaPath(root, id))
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
	if !exists(t, metaPath(root, "pvc-x")) || !exists(t, filepath.Join(root, "pvc-x")) {
		t.Error("node b's volume lost its record or directory to node a's Recover")
	}
	left := strings.Join(append(names(t, filepath.Join(root, dirvol.StagingDir)), names(t, filepath.Join(root, dirvol.TrashDir))...), ",")
	if left != "node-b.create-1,node-b.XYZ" {
		t.Errorf("staging and trash hold %q, want node b's entries only", left)
	}
}
