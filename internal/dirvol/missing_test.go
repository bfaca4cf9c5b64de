package dirvol_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

func TestMissingReportsVolumesRemovedBehindTheStoresBack(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := open(t, root, nil)
	gone := mustCreate(t, s, "pvc-gone", spec(0o770, 1<<20))
	mustCreate(t, s, "pvc-kept", spec(0o770, 1<<20))
	if err := os.RemoveAll(gone.Path); err != nil {
		t.Fatal(err)
	}
	missing, err := s.Missing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0].ID != "pvc-gone" || missing[0].CapacityBytes != 1<<20 || missing[0].Path != gone.Path {
		t.Fatalf("Missing() = %+v, want only pvc-gone with its capacity and path", missing)
	}
	if err := s.Delete(ctx, "pvc-gone"); err != nil {
		t.Fatal(err)
	}
	if missing, _ = s.Missing(ctx); len(missing) != 0 {
		t.Fatalf("after Delete, Missing() = %+v, want none", missing)
	}
}

func TestDeleteCanPurgeInBackground(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := dirvol.Open(root, dirvol.Options{PurgeInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	vol := mustCreate(t, s, "pvc-big", spec(0o770, 1))
	writeFile(t, vol.Path+"/data", 1<<20)
	if err := s.Delete(ctx, "pvc-big"); err != nil {
		t.Fatal(err)
	}
	if exists(t, vol.Path) {
		t.Fatal("volume still in the pool after Delete returned")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(names(t, root+"/"+dirvol.TrashDir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("trash never emptied: %v", names(t, root+"/"+dirvol.TrashDir))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
