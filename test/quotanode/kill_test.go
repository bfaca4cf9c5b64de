package quotanode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// The steps of create, expand and delete after which hpp-csi can be
// killed (internal/prjquota/doc.go; the driver's own: create.published,
// expand.recorded, delete.trashed), each on the paths that pass it: a
// clone (its ID set before the copy), and the expansion that adopts a
// directory the replaced driver made (assign, then the ID on every entry).
var killSteps = []struct{ call, step string }{
	{"create", "assign.linked"}, {"create", "assign.limited"}, {"create", "apply"}, {"create", "create.published"},
	{"clone", "assign.linked"}, {"clone", "apply"}, {"clone", "create.published"},
	{"expand", "expand.recorded"}, {"expand", "grow.limited"},
	{"adopt", "expand.recorded"}, {"adopt", "assign.linked"}, {"adopt", "assign.limited"}, {"adopt", "adopt.tree"},
	{"delete", "delete.trashed"}, {"delete", "release.unlimited"}, {"delete", "release.unlinked"},
}

// testKills kills hpp-csi after each step, restarts it and retries the
// call as the CO would; then every live volume carries its own ID with a
// limit equal to its size, no ID without a volume is linked or limited,
// and once everything is deleted nothing is left.
func testKills(t *testing.T, d *csitest.Driver, mnt string) {
	root := filepath.Join(mnt, csitest.VolumesSubdir)
	live := map[string]int64{}
	for i, ks := range killSteps {
		id := fmt.Sprintf("pvc-kill-%d", i)
		src := id + "-source"
		size := int64(10 * MiB)
		run := func(ctx context.Context, c *csitest.Client) error {
			switch ks.call {
			case "create":
				return createVolume(ctx, c, id, size)
			case "clone":
				return createFrom(ctx, c, id, size, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
					Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}})
			case "expand", "adopt":
				return expandVolume(ctx, c, id, filepath.Join(root, id), 2*size)
			default:
				return deleteVolume(ctx, c, id)
			}
		}
		switch ks.call {
		case "clone":
			withClient(t, d, func(ctx context.Context, c *csitest.Client) error { return createVolume(ctx, c, src, size) })
			writeTree(t, filepath.Join(root, src), 2)
			live[src] = size
		case "adopt":
			// The replaced driver's directory: no record, no project ID.
			if err := os.Mkdir(filepath.Join(root, id), 0o777); err != nil {
				t.Fatal(err)
			}
			writeTree(t, filepath.Join(root, id), 2)
		case "expand", "delete":
			withClient(t, d, func(ctx context.Context, c *csitest.Client) error { return createVolume(ctx, c, id, size) })
		}
		log, callErr, waitErr := callKilled(t, d, ks.step, run)
		if err := killedAt(log, ks.step, callErr, waitErr); err != nil {
			t.Fatalf("%s %s: killed after %q? %v", ks.call, id, ks.step, err)
		}
		restart(t, d)
		withClient(t, d, run)
		switch ks.call {
		case "create", "clone":
			live[id] = size
		case "expand", "adopt":
			live[id] = 2 * size
		}
		checkConsistent(t, root, live, ks.call+" killed after "+ks.step)
	}
	t.Logf("hpp-csi SIGKILLed at %d points (create, clone, expand, adoption, delete), restarted and the call retried each time; %d volumes consistent", len(killSteps), len(live))
	for id := range live {
		withClient(t, d, func(ctx context.Context, c *csitest.Client) error { return deleteVolume(ctx, c, id) })
	}
	checkConsistent(t, root, map[string]int64{}, "deleting every volume")
	waitFor(t, "every ID's blocks purged", func() error {
		for id := uint32(firstID); id <= lastID; id++ {
			if q, err := kernel.Quota(root, id); err != nil || q != (prjquota.Quota{}) {
				return fmt.Errorf("project %d: %+v, %w", id, q, err)
			}
		}
		return nil
	})
}

func restart(t *testing.T, d *csitest.Driver, env ...string) {
	t.Helper()
	if err := d.Kill(); err != nil {
		t.Fatal(err)
	}
	d.Env = env
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
}

func withClient(t *testing.T, d *csitest.Driver, f func(context.Context, *csitest.Client) error) {
	t.Helper()
	c, err := csitest.Connect(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := f(t.Context(), c); err != nil {
		t.Fatal(err)
	}
}

// checkConsistent: each live volume has its own linked ID, set on its
// directory with the inherit flag, limited to its size; no other ID of the
// range is linked or limited; no staging is left.
func checkConsistent(t *testing.T, root string, live map[string]int64, after string) {
	t.Helper()
	links := map[uint32]string{}
	entries, err := os.ReadDir(filepath.Join(root, prjquota.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			t.Fatalf("after %s: stray %s in the ID links", after, e.Name())
		}
		vol, err := os.Readlink(filepath.Join(root, prjquota.StateDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		links[uint32(id)] = vol
	}
	seen := map[string]bool{}
	for id := uint32(firstID); id <= lastID; id++ {
		q, err := kernel.Quota(root, id)
		if err != nil {
			t.Fatal(err)
		}
		vol, linked := links[id]
		size, isLive := live[vol]
		switch {
		case linked && !isLive:
			t.Errorf("after %s: project %d is linked to %q, which does not exist (leaked)", after, id, vol)
		case linked && seen[vol]:
			t.Errorf("after %s: %q holds two project IDs", after, vol)
		case linked:
			seen[vol] = true
			pid, inherit, err := kernel.Project(filepath.Join(root, vol))
			if err != nil || pid != id || !inherit || q.HardBytes != size {
				t.Errorf("after %s: %q: directory project %d inherit %v (%v), limit %d; want project %d limited to %d", after, vol, pid, inherit, err, q.HardBytes, id, size)
			}
			for p, pid := range treeProjects(t, filepath.Join(root, vol)) {
				if pid != id {
					t.Errorf("after %s: %s carries project %d, its volume %d", after, p, pid, id)
				}
			}
		case q.HardBytes != 0:
			t.Errorf("after %s: project %d is limited to %d bytes but held by no volume (leaked)", after, id, q.HardBytes)
		}
	}
	for vol := range live {
		if !seen[vol] {
			t.Errorf("after %s: volume %q holds no project ID", after, vol)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(root, ".hpp-staging")); len(left) > 0 {
		t.Errorf("after %s: staging not emptied: %d entries", after, len(left))
	}
}
