package dirvol_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// testSetAttribute: an attribute set, kept by a new Store over the same
// root (what a restart reads), removed again; a repeat changes nothing; a
// directory without a record takes no attribute but loses none; a missing
// volume is ErrNotFound.
func testSetAttribute(t *testing.T, root string) {
	ctx := context.Background()
	s := open(t, root, nil)
	if _, _, err := s.Create(ctx, "pvc-1", dirvol.Spec{CapacityBytes: 5, Attributes: map[string]string{"keep": "me"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		vol, err := s.SetAttribute(ctx, "pvc-1", "mark", "ns/claim")
		if err != nil || vol.Attributes["mark"] != "ns/claim" || vol.Attributes["keep"] != "me" {
			t.Fatalf("set: %+v, %v", vol.Attributes, err)
		}
	}
	again := open(t, root, nil)
	got, err := again.Get(ctx, "pvc-1")
	if err != nil || got.Attributes["mark"] != "ns/claim" || got.CapacityBytes != 5 {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
	for range 2 {
		vol, err := again.SetAttribute(ctx, "pvc-1", "mark", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := vol.Attributes["mark"]; ok || vol.Attributes["keep"] != "me" {
			t.Fatalf("removed: %+v", vol.Attributes)
		}
	}
	if got, err := open(t, root, nil).Get(ctx, "pvc-1"); err != nil || got.Attributes["mark"] != "" || got.Attributes["keep"] != "me" {
		t.Fatalf("after removal and reopening: %+v, %v", got.Attributes, err)
	}
	if err := os.Mkdir(filepath.Join(root, "by-hand"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAttribute(ctx, "by-hand", "mark", ""); err != nil {
		t.Fatalf("removing from a directory without a record: %v", err)
	}
	if _, err := s.SetAttribute(ctx, "by-hand", "mark", "x"); err == nil {
		t.Fatal("a directory without a record took an attribute")
	}
	if _, err := s.SetAttribute(ctx, "missing", "mark", "x"); !errors.Is(err, dirvol.ErrNotFound) {
		t.Fatalf("missing volume: %v, want ErrNotFound", err)
	}
}
