package snapshot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/snapshot"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

func newVolume(t *testing.T, dir, content string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCreateGetListDelete(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	area := filepath.Join(base, "snapshots")
	s, err := snapshot.Open(area, "node", treecopy.Copy, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := newVolume(t, filepath.Join(base, "pvc-a"), "version 1")
	snap, created, err := s.Create(ctx, "snap-1", snapshot.Source{VolumeID: "pvc-a", Dir: src, CapacityBytes: 5 << 20})
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if snap.SizeBytes != 5<<20 || snap.SourceVolumeID != "pvc-a" || time.Since(snap.Created) > time.Hour {
		t.Fatalf("snapshot = %+v", snap)
	}
	// Point in time: later writes to the volume do not reach it.
	if err := os.WriteFile(filepath.Join(src, "file"), []byte("version 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(snap.Data, "file")); string(data) != "version 1" {
		t.Fatalf("snapshot data = %q, want version 1", data)
	}
	// The KubeVirt driver's layout: data/ and a directory named after the source.
	if fi, err := os.Stat(filepath.Join(area, "snap-1", "pvc-a")); err != nil || !fi.IsDir() {
		t.Fatalf("source marker: %v, %v", fi, err)
	}
	again, created, err := s.Create(ctx, "snap-1", snapshot.Source{VolumeID: "pvc-a", Dir: src})
	if err != nil || created || again.Created != snap.Created {
		t.Fatalf("retry = %+v, %v, %v; want the same snapshot", again, created, err)
	}
	if _, _, err := s.Create(ctx, "snap-1", snapshot.Source{VolumeID: "pvc-b", Dir: src}); !errors.Is(err, snapshot.ErrOtherSource) {
		t.Fatalf("same name, other source = %v, want ErrOtherSource", err)
	}
	// Without a recorded size, the bytes copied.
	snap2, _, err := s.Create(ctx, "snap-2", snapshot.Source{VolumeID: "pvc-a", Dir: src})
	if err != nil || snap2.SizeBytes != int64(len("version 2")) {
		t.Fatalf("snap-2 = %+v, %v", snap2, err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "snap-1" || list[1].ID != "snap-2" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := s.Delete(ctx, "snap-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "snap-1"); err != nil {
		t.Fatalf("second Delete = %v, want success", err)
	}
	if _, err := s.Get(ctx, "snap-1"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	if _, err := s.Get(ctx, "../x"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("Get of an impossible id = %v, want ErrNotFound", err)
	}
	requireEmpty(t, filepath.Join(area, snapshot.TrashDir))
}

// A snapshot the KubeVirt driver took (no hpp record) is listed and usable.
func TestUpstreamSnapshotIsAdopted(t *testing.T) {
	area := t.TempDir()
	newVolume(t, filepath.Join(area, "snap-old", "data"), "old")
	if err := os.Mkdir(filepath.Join(area, "snap-old", "pvc-x"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(area, "node", treecopy.Copy, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Get(context.Background(), "snap-old")
	if err != nil || snap.SourceVolumeID != "pvc-x" || snap.Created.IsZero() || snap.Data != filepath.Join(area, "snap-old", "data") {
		t.Fatalf("Get = %+v, %v", snap, err)
	}
}
