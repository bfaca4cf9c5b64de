package dirvol_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// hpp-legacy (the owner, opened with Options{} as cmd/hpp-legacy does) is
// creating a volume in PV_DIR; hpp-csi starts on the same directory and
// recovers it exactly when the owner's record is published and its
// directory still sits in staging. As a plain Store, hpp-csi's Recover
// breaks that create (the evidence for guest.go); as a guest it leaves it
// alone and the owner's volume is complete, record included.
func TestGuestLeavesOwnersCreateInFlight(t *testing.T) {
	inRecordForms(t, t.TempDir(), func(t *testing.T, _ string) {
		// The window: the record published (a file) or attached (an
		// attribute) while the directory still sits in staging.
		window := "Rename(staging→records)"
		if attrForm(t.TempDir()) {
			window = "SetRecordAttr(staging)"
		}
		for _, tc := range []struct {
			name  string
			guest bool
		}{{"plain store breaks the owner's create", false}, {"guest store", true}} {
			t.Run(tc.name, func(t *testing.T) {
				root := filepath.Join(t.TempDir(), "hpvolumes")
				var recoverErr error
				fired := false
				hooked := &hookFS{FileSystem: dirvol.OS(), after: func(c call) {
					if fired || c.label(root) != window {
						return
					}
					fired = true
					opts := testOptions(nil)
					opts.NodeID, opts.Guest = "node-a.csi", tc.guest
					other, err := dirvol.Open(root, opts)
					if err != nil {
						recoverErr = err
						return
					}
					_, recoverErr = other.Recover(context.Background())
				}}
				owner := open(t, root, hooked)
				vol, _, createErr := owner.Create(context.Background(), "pvc-1", spec(0o770, 5<<20))
				if !fired || recoverErr != nil {
					t.Fatalf("the second store's Recover did not run in the create's window %s: fired %v, %v", window, fired, recoverErr)
				}
				if !tc.guest {
					// Its Recover removed the owner's staged directory (and
					// a record file): the create fails.
					if createErr == nil {
						t.Fatalf("create succeeded under a plain store's Recover (volume %+v); the guest mode is not needed?", vol)
					}
					t.Logf("owner's create under a plain store's Recover: %v", createErr)
					return
				}
				if createErr != nil {
					t.Fatalf("owner's create failed under a guest's Recover: %v", createErr)
				}
				got, err := owner.Get(context.Background(), "pvc-1")
				if err != nil || !got.HasMeta || got.CapacityBytes != 5<<20 {
					t.Fatalf("owner's volume after a guest's Recover = %+v, %v; want its record (5 MiB)", got, err)
				}
			})
		}
	})
}

// A guest never creates, leaves the owner's staging, trash and orphan
// records to the owner, deletes through its own trash, and sees the
// owner's records (reservations) of live volumes.
func TestGuestStore(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "hpvolumes")
	owner := open(t, root, nil)
	mustCreate(t, owner, "pvc-live", spec(0o770, 1<<20))
	for _, p := range []string{
		filepath.Join(root, dirvol.StagingDir, "local.dir-owner"),
		filepath.Join(root, dirvol.TrashDir, "local.owner-trash"),
		filepath.Join(root, dirvol.TrashDir, "node-a_csi.guest-trash"),
	} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	orphan := metaPath(root, "pvc-orphan")
	if err := os.WriteFile(orphan, metaRecord(t, root, "pvc-live"), 0o600); err != nil {
		t.Fatal(err)
	}

	guest, err := dirvol.Open(root, dirvol.Options{NodeID: "node-a.csi", Guest: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := guest.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FinishedDeletes != 1 || rep.RemovedStaging != 0 || rep.RemovedOrphanMeta != 0 {
		t.Fatalf("guest Recover = %+v, want only its own trash entry", rep)
	}
	if got := names(t, filepath.Join(root, dirvol.TrashDir)); len(got) != 1 || got[0] != "local.owner-trash" {
		t.Fatalf("trash after the guest's Recover = %v, want the owner's entry only", got)
	}
	if !exists(t, filepath.Join(root, dirvol.StagingDir, "local.dir-owner")) || !exists(t, orphan) {
		t.Fatal("the guest's Recover removed the owner's staging entry or record")
	}
	if got := guest.Reserved(); got != 1<<20 {
		t.Fatalf("guest Reserved = %d, want the owner's live volume's 1 MiB", got)
	}
	_, _, err = guest.Create(ctx, "pvc-new", spec(0o770, 0))
	if err == nil || !strings.Contains(err.Error(), "belongs to another process (opened as a guest)") {
		t.Fatalf("guest Create: %v", err)
	}
	if exists(t, filepath.Join(root, "pvc-new")) {
		t.Fatal("guest Create made a directory")
	}

	if err := guest.Delete(ctx, "pvc-live"); err != nil {
		t.Fatal(err)
	}
	if exists(t, filepath.Join(root, "pvc-live")) || exists(t, metaPath(root, "pvc-live")) {
		t.Fatal("guest Delete left the volume or its record")
	}
	if got := names(t, filepath.Join(root, dirvol.TrashDir)); len(got) != 1 || got[0] != "local.owner-trash" {
		t.Fatalf("trash after the guest's delete = %v, want the owner's entry only", got)
	}
}
