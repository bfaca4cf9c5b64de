package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

func TestLddPaths(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007f1a96e6b000)
	libblkid.so.1 => /lib/x86_64-linux-gnu/libblkid.so.1 (0x00007f1a96d9b000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1a96ba0000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f1a96e6d000)
`
	want := []string{"/lib/x86_64-linux-gnu/libblkid.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if got := lddPaths(out); !reflect.DeepEqual(got, want) {
		t.Errorf("lddPaths = %q, want %q", got, want)
	}
}

// The image's tools run from the image's own files alone: its layer,
// unpacked, is a root in which blkid and mkfs.xfs start (chroot: root).
func TestMounterImageToolsRunInsideIt(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range append([]string{"ldd"}, MounterTools...) {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.MissingPrerequisite(t, "%s not found (%v); install xfsprogs and util-linux (make deps)", tool, err)
		}
	}
	img, err := MounterImage(context.Background(), "localhost/hpp/hpp-mounter:test", "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	layer, err := layerTar(img.Files)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, layer, root)
	for _, args := range [][]string{{"/usr/sbin/blkid", "-V"}, {"/usr/sbin/mkfs.xfs", "-V"}} {
		out, err := exec.Command("chroot", append([]string{root}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("chroot %s %v: %v: %s", root, args, err, out)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "usr/bin/mounter")); err != nil || target != "hpp-mounter" {
		t.Errorf("/usr/bin/mounter -> %q, %v; want hpp-mounter (upstream's command)", target, err)
	}
}

func unpack(t *testing.T, layer []byte, root string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, strings.TrimSuffix(h.Name, "/"))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
