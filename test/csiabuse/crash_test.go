package csiabuse

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const (
	crashRounds  = 20
	createsRound = 24
	filesPerVol  = 300 // so deletes take long enough to be caught midway
	crashUID     = 1000
	crashGID     = 2000
	crashMode    = os.FileMode(0o750)
	// The kill lands at a random point in this window after the burst
	// starts; a burst on tmpfs takes a few milliseconds.
	killWindowMicros = 4000
)

var recoveredRE = regexp.MustCompile(`storage pool opened.*"finishedDeletes": (\d+), "removedStaging": (\d+), "removedOrphanMeta": (\d+)`)

func crashParams() map[string]string {
	return map[string]string{
		contract.ParamStoragePool: poolName,
		csitest.DirectoryUID:      strconv.Itoa(crashUID),
		csitest.DirectoryGID:      strconv.Itoa(crashGID),
		csitest.DirectoryMode:     fmt.Sprintf("%#o", crashMode),
	}
}

func crashSize(id string) int64 { return int64(len(id)) * MiB }

// SIGKILL in the middle of bursts of creates and deletes, again and again.
// After each restart every volume is complete (directory with its mode and
// owner, and its meta file) or absent, hpp's staging and trash are empty,
// and retrying each interrupted call succeeds.
func TestKillDuringCreateAndDelete(t *testing.T) {
	// tmpfs: a SIGKILL leaves the same page-cache state on any
	// filesystem, and without a disk's fsync latency 20 rounds stay quick.
	pool := csitest.Tmpfs(t, 1<<30, 0)
	d := startDriver(t, pool)
	root := volumesDir(pool)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)

	var live []string // volumes that exist and are full of files
	var interrupted, recovered, cutCreates, cutDeletes int
	for round := range crashRounds {
		var creates, deletes []string
		for i := range createsRound {
			creates = append(creates, fmt.Sprintf("pvc-r%02d-%02d", round, i))
		}
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		deletes, live = live[:len(live)/2], live[len(live)/2:]

		c, err := csitest.Connect(d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		// Connected before the burst, so the kill window is spent in the
		// driver, not in dialing.
		if _, err := c.GetPluginInfo(csitest.Ctx(t), &csi.GetPluginInfoRequest{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed := 0
		answered := map[string]bool{} // calls answered OK before the kill
		note := func(id string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			answered[id] = true
		}
		start := make(chan struct{})
		for _, id := range creates {
			wg.Go(func() {
				<-start
				_, err := c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest(id, node, crashSize(id), crashParams()))
				note(id, err)
			})
		}
		for _, id := range deletes {
			wg.Go(func() {
				<-start
				_, err := c.DeleteVolume(csitest.Ctx(t), &csi.DeleteVolumeRequest{VolumeId: id})
				note(id, err)
			})
		}
		close(start)
		time.Sleep(time.Duration(rng.IntN(killWindowMicros)) * time.Microsecond)
		if err := d.Kill(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		_ = c.Close()
		if failed > 0 {
			interrupted++
		}
		for _, id := range creates {
			if !answered[id] {
				cutCreates++
			}
		}
		for _, id := range deletes {
			if !answered[id] {
				cutDeletes++
			}
		}

		mark := d.LogLen()
		if err := d.Restart(); err != nil {
			t.Fatal(err)
		}
		if m := recoveredRE.FindStringSubmatch(d.LogSince(mark)); m != nil && (m[1] != "0" || m[2] != "0" || m[3] != "0") {
			recovered++
			t.Logf("round %d: %d calls cut off; recovery finished %s deletes, removed %s staged creates and %s orphan meta files",
				round, failed, m[1], m[2], m[3])
		}

		checkConsistent(t, pool, round)
		// What the driver answered OK to before it died stays done.
		for _, id := range creates {
			if answered[id] && !exists(filepath.Join(root, id)) {
				t.Errorf("round %d: CreateVolume %s was answered OK, but the volume is gone after the restart", round, id)
			}
		}
		for _, id := range deletes {
			if answered[id] && exists(filepath.Join(root, id)) {
				t.Errorf("round %d: DeleteVolume %s was answered OK, but the volume is back after the restart", round, id)
			}
		}
		if t.Failed() {
			return
		}

		// Retry every interrupted call, as the CO would.
		c, err = csitest.Connect(d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range creates {
			resp, err := c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest(id, node, crashSize(id), crashParams()))
			if err != nil || resp.GetVolume().GetCapacityBytes() != crashSize(id) {
				t.Fatalf("round %d: retrying CreateVolume %s: %v, %v", round, id, resp, err)
			}
			populate(t, filepath.Join(root, id))
			live = append(live, id)
		}
		for _, id := range deletes {
			if _, err := c.DeleteVolume(csitest.Ctx(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatalf("round %d: retrying DeleteVolume %s: %v", round, id, err)
			}
			if exists(filepath.Join(root, id)) {
				t.Fatalf("round %d: %s still exists after a successful retried delete", round, id)
			}
		}
		_ = c.Close()
		checkConsistent(t, pool, round)
		got := visible(t, root)
		want := slices.Clone(live)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: volumes on disk %v; want %v", round, got, want)
		}
	}
	t.Logf("%d rounds: %d had calls cut off by SIGKILL (%d creates, %d deletes), %d needed recovery at restart",
		crashRounds, interrupted, cutCreates, cutDeletes, recovered)
	// A run whose kills all landed before or after the bursts proved
	// nothing about creates or deletes cut off midway.
	if cutCreates == 0 || cutDeletes == 0 {
		t.Errorf("the kills cut off %d creates and %d deletes; want at least one of each (seed %d)", cutCreates, cutDeletes, seed)
	}
}

// populate puts files into a volume so that deleting it takes a while.
func populate(t *testing.T, dir string) {
	t.Helper()
	for i := range filesPerVol {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkConsistent: every volume directory is complete, every meta file has
// its directory, and staging and trash are empty.
func checkConsistent(t *testing.T, pool string, round int) {
	t.Helper()
	root := volumesDir(pool)
	for _, area := range []string{csitest.StagingDir, csitest.TrashDir} {
		left := csitest.Entries(t, filepath.Join(root, area))
		if area == csitest.TrashDir {
			left = csitest.Purged(root)
		}
		if len(left) != 0 {
			t.Errorf("round %d: %s after restart: %v; want empty", round, area, left)
		}
	}
	for _, id := range visible(t, root) {
		mode, uid, gid, err := ownership(filepath.Join(root, id))
		if err != nil || mode != crashMode || uid != crashUID || gid != crashGID {
			t.Errorf("round %d: volume %s: mode %v owner %d:%d (%v); want %v %d:%d", round, id, mode, uid, gid, err, crashMode, crashUID, crashGID)
		}
		m, err := readMeta(pool, id)
		if err != nil || m.ID != id || m.Kind != "persistent" || m.CapacityBytes != crashSize(id) {
			t.Errorf("round %d: volume %s: meta %+v, %v; want id, kind persistent, capacity %d", round, id, m, err, crashSize(id))
		}
	}
	for _, id := range csitest.RecordIDs(t, root) {
		if !exists(filepath.Join(root, id)) {
			t.Errorf("round %d: record of %s without its volume directory", round, id)
		}
	}
}
