package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

func needBusybox(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(hostBusybox); err != nil {
		testutil.MissingPrerequisite(t, "%s missing (Debian's busybox-static; `make deps` installs it): %v", hostBusybox, err)
	}
}

func TestBusyboxImageAsRenamesAndKeepsApplets(t *testing.T) {
	needBusybox(t)
	img, err := BusyboxImageAs(context.Background(), "localhost/e2e-test-images/nginx:1.27.0-2")
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "localhost/e2e-test-images/nginx:1.27.0-2" {
		t.Errorf("ref %q", img.Ref)
	}
	if !hasFile(img, "/bin/sh", "busybox") || !hasFile(img, "/bin/cat", "busybox") {
		t.Errorf("busybox applets sh and cat missing: %d files", len(img.Files))
	}
	if len(img.Entrypoint) != 0 || !slices.Equal(img.Cmd, []string{"sh"}) {
		t.Errorf("entrypoint %q cmd %q, want none and [sh]", img.Entrypoint, img.Cmd)
	}
}

func TestAgnhostImageRunsAgnhostPauseWithApplets(t *testing.T) {
	needBusybox(t)
	bin := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := AgnhostImage(context.Background(), "localhost/e2e-test-images/agnhost:2.66.1", bin)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img.Entrypoint, []string{"/agnhost"}) || !slices.Equal(img.Cmd, []string{"pause"}) {
		t.Errorf("entrypoint %q cmd %q, want [/agnhost] [pause]", img.Entrypoint, img.Cmd)
	}
	if !hasFile(img, "/agnhost", "") || !hasFile(img, "/bin/nsenter", "busybox") || !hasFile(img, "/bin/find", "busybox") {
		t.Errorf("want /agnhost and the applets nsenter and find")
	}
	if _, err := writeTestArchive(t, img); err != nil {
		t.Fatal(err)
	}
}

func TestAgnhostImageRefusesAnotherBinaryName(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := AgnhostImage(context.Background(), "localhost/e2e-test-images/agnhost:2.66.1", bin)
	if err == nil || !strings.Contains(err.Error(), "want a file named agnhost") {
		t.Fatalf("err %v, want one naming the binary", err)
	}
}

func hasFile(img Image, path, symlink string) bool {
	for _, f := range img.Files {
		if f.Path == path && f.Symlink == symlink {
			return true
		}
	}
	return false
}

// writeTestArchive checks that the image makes a docker archive.
func writeTestArchive(t *testing.T, img Image) (string, error) {
	out := filepath.Join(t.TempDir(), "img.tar")
	return out, writeDockerArchive(img, out)
}
