package quotanode

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// testCopies: a snapshot, a volume restored from it and a clone of its
// source each stand on their own. The restore and the clone get a project
// ID of their own, on their directory and on everything copied into it,
// limited to their own size; the source's usage does not change when they
// are made or written; the snapshot's files carry no volume's ID (outside
// every limit); a write into the clone stops at the clone's limit, not the
// source's.
func testCopies(t *testing.T, d *csitest.Driver, mnt, kind string) {
	ctx := t.Context()
	c := d.Client(t)
	root := filepath.Join(mnt, csitest.VolumesSubdir)
	const src, restored, cloned = "pvc-source", "pvc-restored", "pvc-cloned"
	sizes := map[string]int64{src: 20 * MiB, restored: 30 * MiB, cloned: 40 * MiB}
	if err := createVolume(ctx, c, src, sizes[src]); err != nil {
		t.Fatal(err)
	}
	writeTree(t, filepath.Join(root, src), 8)
	srcID, _, err := kernel.Project(filepath.Join(root, src))
	if err != nil {
		t.Fatal(err)
	}
	srcUsed := usedBytes(t, root, srcID)

	snap, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: src, Name: "snapshot-source"})
	if err != nil {
		t.Fatal(err)
	}
	snapID := snap.GetSnapshot().GetSnapshotId()
	if err := createFrom(ctx, c, restored, sizes[restored], &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapID}}}); err != nil {
		t.Fatal(err)
	}
	if err := createFrom(ctx, c, cloned, sizes[cloned], &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}}); err != nil {
		t.Fatal(err)
	}

	ids := map[uint32]string{}
	for _, vol := range []string{src, restored, cloned} {
		id := ownProject(t, root, vol)
		if other, dup := ids[id]; dup {
			t.Fatalf("%s and %s both carry project %d; a copy must never carry its source's ID", vol, other, id)
		}
		ids[id] = vol
		q, err := kernel.Quota(root, id)
		if err != nil {
			t.Fatal(err)
		}
		if q.HardBytes != sizes[vol] || q.UsedBytes < 8*MiB {
			t.Fatalf("%s: project %d %+v; want its own %d-byte limit, charged with the 8 MiB copied in", vol, id, q, sizes[vol])
		}
		t.Logf("%s: project %d, limit %d bytes, %d bytes used", vol, id, q.HardBytes, q.UsedBytes)
	}
	if got := usedBytes(t, root, srcID); got != srcUsed {
		t.Fatalf("the source's project %d: %d bytes used after the snapshot, restore and clone, %d before: a copy was charged to it", srcID, got, srcUsed)
	}
	snapDir := filepath.Join(root, ".hpp-snapshots", snapID)
	for p, id := range treeProjects(t, snapDir) {
		if id >= firstID && id <= lastID {
			t.Fatalf("snapshot entry %s carries project %d (%s's); snapshots are outside every volume's limit", p, id, ids[id])
		}
	}

	// The clone's own limit holds (the source's would stop it 20 MiB sooner).
	target := publish(t, c, cloned)
	w := startWriter(t, filepath.Join(target, "more"))
	n, errno := w.do("write 40")
	if errno == 0 {
		_, errno = w.do("sync")
	}
	cloneID := ownProject(t, root, cloned)
	if want := quotaErrno[kind]; errno != want || n < 28*MiB || n >= 32*MiB {
		t.Fatalf("writing 40 MiB into the 40 MiB clone holding 8 MiB: %d bytes, then %v; want %v after 28-32 MiB", n, errno, want)
	}
	t.Logf("the clone (project %d, 40 MiB) refused its write after %d more bytes: %v", cloneID, n, errno)
	w.stop()
	if got := usedBytes(t, root, srcID); got != srcUsed {
		t.Fatalf("writing into the clone changed the source's usage: %d bytes, %d before", got, srcUsed)
	}
	unpublish(t, c, cloned, target)

	if _, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snapID}); err != nil {
		t.Fatal(err)
	}
	for _, vol := range []string{cloned, restored, src} {
		if err := deleteVolume(ctx, c, vol); err != nil {
			t.Fatal(err)
		}
	}
	checkConsistent(t, root, map[string]int64{}, "deleting the source and its copies")
	waitPurged(t, root, ids)
}

// testAdopted: a directory the replaced driver made has no project quota;
// its stats say so (no size: the pool's free space is what it has) and so
// does its health (SizeNotEnforced), until an expansion gives it an ID over
// everything it holds and a limit that the kernel then enforces.
func testAdopted(t *testing.T, d *csitest.Driver, mnt, kind string) {
	ctx := t.Context()
	c := d.Client(t)
	root := filepath.Join(mnt, csitest.VolumesSubdir)
	const vol = "pvc-adopted"
	dir := filepath.Join(root, vol)
	// As the KubeVirt driver leaves them: a world-writable directory.
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, 6)
	if id, _, err := kernel.Project(dir); err != nil || id != 0 {
		t.Fatalf("the replaced driver's directory carries project %d (%v); want 0", id, err)
	}

	stats, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: dir})
	if err != nil {
		t.Fatal(err)
	}
	b := stats.GetUsage()[0]
	if b.GetUsed() < 6*MiB || b.GetTotal() != b.GetUsed()+b.GetAvailable() || b.GetAvailable() < freeBytes(t, mnt)/2 {
		t.Fatalf("stats of the unenforced directory = %v; want its walked usage (6 MiB+) and the pool's free space (%d bytes) as what is available: it has no size", stats, freeBytes(t, mnt))
	}
	t.Logf("unenforced: stats used %d, available %d, total %d bytes (the pool's free space)", b.GetUsed(), b.GetAvailable(), b.GetTotal())
	wantHealth := `volume "pvc-adopted" in storage pool "q" has no size limit: it was made before the pool enforced sizes (or by the replaced driver); expanding it (any new size) gives it a project quota`
	checkHealth(t, c, vol, wantHealth)

	if err := expandVolume(ctx, c, vol, dir, 50*MiB); err != nil {
		t.Fatal(err)
	}
	id := ownProject(t, root, vol)
	q, err := kernel.Quota(root, id)
	if err != nil || q.HardBytes != 50*MiB || q.UsedBytes < 6*MiB {
		t.Fatalf("adopted at 50 MiB: project %d %+v (%v); want the 50 MiB limit charged with the 6 MiB already there", id, q, err)
	}
	checkHealth(t, c, vol, "")
	stats, err = c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: dir})
	if err != nil || stats.GetUsage()[0].GetTotal() != 50*MiB || stats.GetUsage()[0].GetUsed() != q.UsedBytes {
		t.Fatalf("stats after adoption = %v, %v; want total 50 MiB, the quota's %d bytes used", stats, err, q.UsedBytes)
	}
	t.Logf("adopted: project %d, limit %d bytes, %d bytes used", id, q.HardBytes, q.UsedBytes)

	target := publish(t, c, vol)
	w := startWriter(t, filepath.Join(target, "more"))
	n, errno := w.do("write 50")
	if errno == 0 {
		_, errno = w.do("sync")
	}
	if want := quotaErrno[kind]; errno != want || n < 42*MiB || n >= 44*MiB {
		t.Fatalf("writing 50 MiB into the adopted 50 MiB volume holding 6 MiB: %d bytes, then %v; want %v after 42-44 MiB", n, errno, want)
	}
	t.Logf("the adopted volume refused its write after %d more bytes: %v", n, errno)
	w.stop()
	unpublish(t, c, vol, target)
	if err := deleteVolume(ctx, c, vol); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, root, map[string]int64{}, "deleting the adopted volume")
	waitPurged(t, root, map[uint32]string{id: vol})
}

func createFrom(ctx context.Context, c *csitest.Client, id string, size int64, src *csi.VolumeContentSource) error {
	req := createRequest(id, size)
	req.VolumeContentSource = src
	_, err := c.CreateVolume(ctx, req)
	return err
}

// writeTree fills dir as a workload would: a file of mib MiB and a
// subdirectory with a small file.
func writeTree(t *testing.T, dir string, mib int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "disk.img"), make([]byte, mib*MiB), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub", "dir"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "dir", "notes"), []byte("hello"), 0o666); err != nil {
		t.Fatal(err)
	}
}

// ownProject is the project ID of volume vol, checked to be one of the
// pool's range, with the inherit flag, on every entry inside it and linked
// to vol in the pool's ID links.
func ownProject(t *testing.T, root, vol string) uint32 {
	t.Helper()
	dir := filepath.Join(root, vol)
	id, inherit, err := kernel.Project(dir)
	if err != nil || !inherit || id < firstID || id > lastID {
		t.Fatalf("%s: project %d inherit %v (%v); want an ID in %d-%d with the inherit flag", vol, id, inherit, err, firstID, lastID)
	}
	for p, pid := range treeProjects(t, dir) {
		if pid != id {
			t.Fatalf("%s: %s carries project %d, the volume %d", vol, p, pid, id)
		}
	}
	if link, err := os.Readlink(filepath.Join(root, prjquota.StateDir, fmt.Sprint(id))); err != nil || link != vol {
		t.Fatalf("%s: the link of project %d = %q, %v; want %q", vol, id, link, err, vol)
	}
	return id
}

// treeProjects is the project ID of every directory and regular file under
// dir (dir included), by path.
func treeProjects(t *testing.T, dir string) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return nil
		}
		id, _, err := kernel.Project(p)
		out[p] = id
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func usedBytes(t *testing.T, root string, id uint32) int64 {
	t.Helper()
	q, err := kernel.Quota(root, id)
	if err != nil {
		t.Fatal(err)
	}
	return q.UsedBytes
}

// checkHealth: the node's and the controller's health of vol say want
// (one DEGRADED SizeNotEnforced entry), or nothing when want is empty.
func checkHealth(t *testing.T, c *csitest.Client, vol, want string) {
	t.Helper()
	ctx := t.Context()
	node, err := c.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: vol})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := c.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: vol})
	if err != nil {
		t.Fatal(err)
	}
	for who, h := range map[string]*csi.VolumeHealth{"NodeGetVolumeHealth": node.GetVolumeHealth(), "ControllerGetVolumeHealth": ctrl.GetVolumeHealth()} {
		e := h.GetHealthStatuses()
		if want == "" {
			if len(e) != 0 {
				t.Fatalf("%s of %s = %v; want no problem", who, vol, h)
			}
			continue
		}
		if len(e) != 1 || e[0].GetStatus() != csi.VolumeHealthErrorType_DEGRADED || e[0].GetReason() != "SizeNotEnforced" || e[0].GetMessage() != want {
			t.Fatalf("%s of %s = %v\nwant one DEGRADED SizeNotEnforced entry saying %q", who, vol, h, want)
		}
	}
}

// waitPurged waits until the deleted volumes' IDs have neither limit nor
// usage: their trash is purged and the IDs can be handed out again.
func waitPurged(t *testing.T, root string, ids map[uint32]string) {
	t.Helper()
	waitFor(t, "the deleted volumes' IDs purged", func() error {
		for id, vol := range ids {
			if q, err := kernel.Quota(root, id); err != nil || q != (prjquota.Quota{}) {
				return fmt.Errorf("project %d (%s): %+v, %w", id, vol, q, err)
			}
		}
		return nil
	})
}
