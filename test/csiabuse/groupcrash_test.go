package csiabuse

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const (
	groupCallers  = 16
	groupAttempts = 20
)

// SIGKILL while a group of CreateVolume callers waits on a shared commit:
// their directories are already renamed into the pool, the fsync that makes
// them durable is in flight or queued, and none has been answered. The pool
// is XFS on a loop device, so that a commit takes long enough to be caught.
// After the restart every volume is complete or absent, every answered call
// stayed done, and retries succeed.
func TestKillWhileGroupWaitsOnCommit(t *testing.T) {
	testutil.RequireRoot(t)
	pool := filepath.Join(testutil.LoopXFS(t, 512<<20), "pool")
	d := startDriver(t, pool)
	root := volumesDir(pool)
	caught := 0
	for attempt := range groupAttempts {
		ids := make([]string, groupCallers)
		for i := range ids {
			ids[i] = fmt.Sprintf("pvc-g%02d-%02d", attempt, i)
		}
		c, err := csitest.Connect(d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		answered := map[string]bool{}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				_, err := c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest(id, node, crashSize(id), crashParams()))
				if err == nil {
					mu.Lock()
					answered[id] = true
					mu.Unlock()
				}
			})
		}
		// Kill as soon as at least two volumes are in the pool whose
		// calls have not been answered: they wait on a commit.
		var waiting []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			mu.Lock()
			waiting = waiting[:0]
			for _, id := range visible(t, root) {
				if slices.Contains(ids, id) && !answered[id] {
					waiting = append(waiting, id)
				}
			}
			done := len(answered)
			mu.Unlock()
			if len(waiting) >= 2 || done == len(ids) {
				break
			}
		}
		if err := d.Kill(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		_ = c.Close()
		if len(waiting) >= 2 {
			caught++
			t.Logf("attempt %d: killed with %d renamed, unanswered creates waiting on a commit; %d answered", attempt, len(waiting), len(answered))
		}
		if err := d.Restart(); err != nil {
			t.Fatal(err)
		}
		checkConsistent(t, pool, attempt)
		for id := range answered {
			if !exists(filepath.Join(root, id)) {
				t.Errorf("attempt %d: CreateVolume %s was answered OK, but the volume is gone after the restart", attempt, id)
			}
		}
		c, err = csitest.Connect(d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, err := c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest(id, node, crashSize(id), crashParams())); err != nil {
				t.Fatalf("attempt %d: retrying CreateVolume %s: %v", attempt, id, err)
			}
		}
		_ = c.Close()
		checkConsistent(t, pool, attempt)
		if t.Failed() || caught >= 3 {
			break
		}
	}
	if caught == 0 {
		t.Fatalf("in %d attempts the kill never landed while two or more creates waited on a commit", groupAttempts)
	}
}
