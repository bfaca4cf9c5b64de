package csiabuse

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// snapshot records every entry under root: type, mode, size, mtime and a
// hash of file contents, so any touch shows up.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v size=%d mtime=%d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			desc += " sha256=" + hex.EncodeToString(sum[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		} else if a != b {
			t.Errorf("%s: %s changed: %s -> %s", what, p, b, a)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s appeared", what, p)
		}
	}
}

// sentinel makes a directory with a file and a subdirectory in it.
func sentinel(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("sentinel: must never be touched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "x"), []byte("nested sentinel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every RPC that takes a volume id refuses hostile ids with InvalidArgument
// and a message that says why; nothing outside the pool (nor the targets of
// planted symlinks inside it) is touched.
func TestHostileVolumeIDs(t *testing.T) {
	base := t.TempDir()
	pool := filepath.Join(base, "pool")
	d := startDriver(t, pool)
	c := d.Client(t)
	root := volumesDir(pool)

	outside, err := os.MkdirTemp("", "hpp-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	sentinel(t, outside)
	// What "../x" and "../../x" would reach from the volumes directory.
	sentinel(t, filepath.Join(pool, "x"))
	sentinel(t, filepath.Join(base, "x"))

	real, err := c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest("pvc-real", node, MiB, csitest.PoolParams(poolName)))
	if err != nil {
		t.Fatal(err)
	}
	sentinel(t, filepath.Join(root, "pvc-real"))
	relOutside, err := filepath.Rel(root, outside)
	if err != nil {
		t.Fatal(err)
	}
	// Planted links: out of the pool (absolute and relative), to another
	// volume, dangling.
	for name, target := range map[string]string{
		"evil":          outside,
		"evil-relative": relOutside,
		"inner":         filepath.Join(root, "pvc-real"),
		"dangling":      filepath.Join(outside, "nowhere"),
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	watched := map[string]map[string]string{}
	for _, dir := range []string{outside, filepath.Join(pool, "x"), filepath.Join(base, "x"), filepath.Join(root, "pvc-real")} {
		watched[dir] = snapshot(t, dir)
	}
	links := map[string]string{}
	for _, name := range []string{"evil", "evil-relative", "inner", "dangling"} {
		links[name], _ = os.Readlink(filepath.Join(root, name))
	}

	long := strings.Repeat("a", 300)
	cases := []struct {
		name, id string
		why      string // in every message
	}{
		{"dotdot-slash", "../x", "without '/'"},
		{"dotdot-dotdot", "../../x", "without '/'"},
		{"slash", "a/b", "without '/'"},
		{"absolute", "/etc", "without '/'"},
		{"nul", "a\x00b", "NUL"},
		{"dotdot", "..", "must not start with '.'"},
		{"dot", ".", "must not start with '.'"},
		{"private-area", csitest.TrashDir, "must not start with '.'"},
		{"empty", "", "required"},
		{"300-chars", long, "300 bytes long"},
		{"newline", "pvc\nx", "only letters, digits"},
		{"reserved", "lost+found", "reserved"},
		{"symlink-outside", "evil", "resolves outside the pool"},
		{"symlink-outside-relative", "evil-relative", "resolves outside the pool"},
		{"symlink-inside", "inner", "symbolic link"},
		{"symlink-dangling", "dangling", "symbolic link"},
	}
	existing := t.TempDir() // a volume_path that exists
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "mount")
			rpcs := map[string]func() error{
				"CreateVolume": func() error {
					_, err := c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest(tc.id, node, MiB, csitest.PoolParams(poolName)))
					return err
				},
				"DeleteVolume": func() error {
					_, err := c.DeleteVolume(csitest.Ctx(t), &csi.DeleteVolumeRequest{VolumeId: tc.id})
					return err
				},
				"NodePublishVolume": func() error {
					_, err := c.NodePublishVolume(csitest.Ctx(t), csitest.PublishRequest(tc.id, target, real.GetVolume().GetVolumeContext()))
					return err
				},
				"NodePublishVolume(ephemeral)": func() error {
					_, err := c.NodePublishVolume(csitest.Ctx(t), csitest.PublishRequest(tc.id, target, map[string]string{
						csitest.EphemeralKey: "true", csitest.PodUIDKey: "uid", contract.ParamStoragePool: poolName,
					}))
					return err
				},
				"NodeUnpublishVolume": func() error {
					_, err := c.NodeUnpublishVolume(csitest.Ctx(t), &csi.NodeUnpublishVolumeRequest{VolumeId: tc.id, TargetPath: target})
					return err
				},
				"ControllerGetVolume": func() error {
					_, err := c.ControllerGetVolume(csitest.Ctx(t), &csi.ControllerGetVolumeRequest{VolumeId: tc.id})
					return err
				},
				"ValidateVolumeCapabilities": func() error {
					_, err := c.ValidateVolumeCapabilities(csitest.Ctx(t), &csi.ValidateVolumeCapabilitiesRequest{
						VolumeId: tc.id, VolumeCapabilities: []*csi.VolumeCapability{csitest.RWO()}})
					return err
				},
				"NodeGetVolumeStats": func() error {
					_, err := c.NodeGetVolumeStats(csitest.Ctx(t), &csi.NodeGetVolumeStatsRequest{VolumeId: tc.id, VolumePath: existing})
					return err
				},
				"ControllerGetVolumeHealth": func() error {
					_, err := c.ControllerGetVolumeHealth(csitest.Ctx(t), &csi.ControllerGetVolumeHealthRequest{VolumeId: tc.id})
					return err
				},
				"NodeGetVolumeHealth": func() error {
					_, err := c.NodeGetVolumeHealth(csitest.Ctx(t), &csi.NodeGetVolumeHealthRequest{VolumeId: tc.id})
					return err
				},
			}
			for rpc, call := range rpcs {
				t.Run(rpc, func(t *testing.T) {
					grpctest.WantCode(t, call(), codes.InvalidArgument, tc.why)
				})
			}
			if exists(target) {
				t.Errorf("target %s was created for a refused id", target)
			}
		})
	}

	for dir, before := range watched {
		sameSnapshot(t, dir, before, snapshot(t, dir))
	}
	for name, want := range links {
		if got, err := os.Readlink(filepath.Join(root, name)); err != nil || got != want {
			t.Errorf("planted link %s: now %q, %v; want it left as %q", name, got, err, want)
		}
	}
	if v := visible(t, root); strings.Join(v, ",") != "dangling,evil,evil-relative,inner,pvc-real" {
		t.Errorf("volumes directory holds %v; want only the real volume and the planted links", v)
	}
	for _, area := range []string{csitest.StagingDir, csitest.TrashDir} {
		left := csitest.Entries(t, filepath.Join(root, area))
		if area == csitest.TrashDir {
			left = csitest.Purged(root)
		}
		if len(left) != 0 {
			t.Errorf("%s: %v; want empty", area, left)
		}
	}
	if m := csitest.RecordIDs(t, root); strings.Join(m, ",") != "pvc-real" {
		t.Errorf("records: %v; want only pvc-real", m)
	}
}
