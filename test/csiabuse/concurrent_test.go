package csiabuse

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const burst = 200

// fire runs call burst times at once, spread over several connections,
// and returns each call's code and answer.
func fire[R any](t *testing.T, clients []*csitest.Client, call func(c *csitest.Client) (R, error)) ([]codes.Code, []R) {
	t.Helper()
	got := make([]codes.Code, burst)
	resps := make([]R, burst)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			<-start
			r, err := call(clients[i%len(clients)])
			got[i], resps[i] = status.Code(err), r
			if err != nil && status.Code(err) != codes.Aborted {
				t.Errorf("call %d: %v; want OK or Aborted", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return got, resps
}

func count(got []codes.Code, c codes.Code) int {
	n := 0
	for _, g := range got {
		if g == c {
			n++
		}
	}
	return n
}

// 200 CreateVolume calls for one name at the same moment make exactly one
// volume; each call is answered OK or Aborted; a retry then gets it.
func TestConcurrentCreateSameName(t *testing.T) {
	pool := filepath.Join(t.TempDir(), "pool")
	d := startDriver(t, pool)
	clients := make([]*csitest.Client, 8)
	for i := range clients {
		clients[i] = d.Client(t)
	}
	req := csitest.CreateRequest("pvc-race", node, 64*MiB, map[string]string{
		contract.ParamStoragePool: poolName, csitest.DirectoryMode: "0770",
	})
	got, resps := fire(t, clients, func(c *csitest.Client) (*csi.CreateVolumeResponse, error) {
		return c.CreateVolume(csitest.Ctx(t), req)
	})
	ok, aborted := count(got, codes.OK), count(got, codes.Aborted)
	t.Logf("%d concurrent CreateVolume: %d OK, %d Aborted", burst, ok, aborted)
	if ok == 0 {
		t.Fatal("no CreateVolume call succeeded")
	}
	var first *csi.Volume
	for i, r := range resps {
		if got[i] != codes.OK {
			continue
		}
		if first == nil {
			first = r.GetVolume()
		} else if !proto.Equal(first, r.GetVolume()) {
			t.Errorf("call %d answered %v; another answered %v", i, r.GetVolume(), first)
		}
	}

	root := volumesDir(pool)
	if v := visible(t, root); !slices.Equal(v, []string{"pvc-race"}) {
		t.Errorf("volume directories = %v; want exactly [pvc-race]", v)
	}
	if m := csitest.RecordIDs(t, root); !slices.Equal(m, []string{"pvc-race"}) {
		t.Errorf("records = %v; want exactly [pvc-race]", m)
	}
	for _, area := range []string{csitest.StagingDir, csitest.TrashDir} {
		left := csitest.Entries(t, filepath.Join(root, area))
		if area == csitest.TrashDir {
			left = csitest.Purged(root)
		}
		if len(left) != 0 {
			t.Errorf("%s after the burst: %v; want empty", area, left)
		}
	}
	if mode, _, _, err := ownership(filepath.Join(root, "pvc-race")); err != nil || mode != 0o770 {
		t.Errorf("volume directory mode %v, %v; want 0770", mode, err)
	}

	again, err := clients[0].CreateVolume(csitest.Ctx(t), req)
	if err != nil || !proto.Equal(again.GetVolume(), first) {
		t.Fatalf("retry after the burst = %v, %v; want OK with %v", again.GetVolume(), err, first)
	}

	// And 200 deletes of it at once: OK or Aborted, and it is gone.
	got, _ = fire(t, clients, func(c *csitest.Client) (*csi.DeleteVolumeResponse, error) {
		return c.DeleteVolume(csitest.Ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-race"})
	})
	t.Logf("%d concurrent DeleteVolume: %d OK, %d Aborted", burst, count(got, codes.OK), count(got, codes.Aborted))
	if v := visible(t, root); len(v) != 0 {
		t.Errorf("volume directories after the delete burst: %v", v)
	}
	for _, area := range []string{csitest.RecordsDir, csitest.StagingDir, csitest.TrashDir} {
		left := csitest.Entries(t, filepath.Join(root, area))
		if area == csitest.TrashDir {
			left = csitest.Purged(root)
		}
		if len(left) != 0 {
			t.Errorf("%s after the delete burst: %v; want empty", area, left)
		}
	}
	if _, err := clients[0].DeleteVolume(csitest.Ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-race"}); err != nil {
		t.Errorf("retrying the delete: %v", err)
	}
}
