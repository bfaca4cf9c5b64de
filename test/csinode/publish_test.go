package csinode

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// A file written through the published target lands in the volume's
// directory in the pool; publishing twice is a no-op; unpublishing removes
// the target and keeps the data.
func TestPublishBindMount(t *testing.T) {
	forEachPoolKind(t, func(t *testing.T, poolPath string) {
		e := newEnv(t, poolPath)
		vol := e.create("pvc-publish", 8*MiB, nil)
		// kubelet makes the target's parent; the driver makes the target.
		target := filepath.Join(t.TempDir(), "pods", "uid", "mount")
		req := csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext())
		e.publish(req)

		m := mounted(t, target)
		if len(m) != 1 {
			t.Fatalf("after publish: %d mounts at %s, want 1: %+v", len(m), target, m)
		}
		if !strings.HasSuffix(m[0].Root, "/csi/pvc-publish") || m[0].HasOption("ro") {
			t.Errorf("mount at target = root %q options %q; want a read-write bind of .../csi/pvc-publish", m[0].Root, m[0].Options)
		}
		if err := os.WriteFile(filepath.Join(target, "hello.txt"), []byte("written through the mount\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(e.volDir("pvc-publish"), "hello.txt"))
		if err != nil || string(got) != "written through the mount\n" {
			t.Fatalf("file in the pool: %q, %v; want what was written through the target", got, err)
		}

		// kubelet retries publish: same volume at the same target is OK
		// and does not stack a second mount.
		e.publish(req)
		if m := mounted(t, target); len(m) != 1 {
			t.Errorf("after a repeated publish: %d mounts at %s, want 1", len(m), target)
		}

		e.unpublish("pvc-publish", target)
		mustNotExist(t, target)
		if m := mounted(t, target); len(m) != 0 {
			t.Errorf("after unpublish: still mounted: %+v", m)
		}
		got, err = os.ReadFile(filepath.Join(e.volDir("pvc-publish"), "hello.txt"))
		if err != nil || string(got) != "written through the mount\n" {
			t.Errorf("data after unpublish: %q, %v; want it kept", got, err)
		}
		// Idempotent: the target is gone already.
		e.unpublish("pvc-publish", target)

		if _, err := e.c.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: "pvc-publish"}); err != nil {
			t.Fatalf("DeleteVolume: %v", err)
		}
		mustNotExist(t, e.volDir("pvc-publish"))
		if e.hasRecord("pvc-publish") {
			t.Error("record of pvc-publish left after DeleteVolume")
		}
	})
}

// Another volume at a target that is already mounted is refused, and the
// mounted one stays.
func TestPublishOtherVolumeAtMountedTarget(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	a := e.create("pvc-a", MiB, nil)
	b := e.create("pvc-b", MiB, nil)
	if err := os.WriteFile(filepath.Join(e.volDir("pvc-a"), "owner"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "mount")
	e.publish(csitest.PublishRequest(a.GetVolumeId(), target, a.GetVolumeContext()))

	_, err := e.c.NodePublishVolume(ctx(t), csitest.PublishRequest(b.GetVolumeId(), target, b.GetVolumeContext()))
	grpctest.WantCode(t, err, codes.AlreadyExists, target, "already has another volume mounted")

	if m := mounted(t, target); len(m) != 1 || !strings.HasSuffix(m[0].Root, "/csi/pvc-a") {
		t.Errorf("mounts at target after the refused publish: %+v; want only pvc-a", m)
	}
	if got, err := os.ReadFile(filepath.Join(target, "owner")); err != nil || string(got) != "a" {
		t.Errorf("target shows %q, %v; want pvc-a's file", got, err)
	}
	e.unpublish("pvc-a", target)
}

// Read-only publishes are read-only for the pod: writes through the target
// fail with EROFS, while the volume itself stays writable.
func TestPublishReadOnly(t *testing.T) {
	cases := []struct {
		name     string
		readonly bool
		mode     csi.VolumeCapability_AccessMode_Mode
	}{
		{"readonly-flag", true, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{"reader-only-mode", false, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY},
	}
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	vol := e.create("pvc-ro", MiB, nil)
	if err := os.WriteFile(filepath.Join(e.volDir("pvc-ro"), "existing"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "mount")
			req := csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext())
			req.Readonly = tc.readonly
			req.VolumeCapability = csitest.MountCapability(tc.mode)
			e.publish(req)
			defer e.unpublish("pvc-ro", target)

			m := mounted(t, target)
			if len(m) != 1 || !m[0].HasOption("ro") {
				t.Fatalf("mount at target: %+v; want one mount with per-mount option ro", m)
			}
			err := os.WriteFile(filepath.Join(target, "new"), []byte("x"), 0o644)
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("creating a file through the target: %v; want EROFS", err)
			}
			f, err := os.OpenFile(filepath.Join(target, "existing"), os.O_WRONLY|os.O_APPEND, 0)
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("opening an existing file for writing through the target: %v; want EROFS", err)
				if f != nil {
					_ = f.Close()
				}
			}
			if err := os.Mkdir(filepath.Join(target, "dir"), 0o755); !errors.Is(err, syscall.EROFS) {
				t.Errorf("mkdir through the target: %v; want EROFS", err)
			}
			if got, err := os.ReadFile(filepath.Join(target, "existing")); err != nil || string(got) != "data" {
				t.Errorf("reading through the target: %q, %v", got, err)
			}
			// Only the pod's view is read-only.
			if err := os.WriteFile(filepath.Join(e.volDir("pvc-ro"), "by-node-"+tc.name), []byte("x"), 0o644); err != nil {
				t.Errorf("the volume directory itself must stay writable: %v", err)
			}
		})
	}
}

// Per-mount flags are applied (checked in mountinfo and by trying to execute
// through the mount); flags a bind mount cannot honour are refused by name.
func TestPublishMountFlags(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	vol := e.create("pvc-flags", MiB, nil)
	script := filepath.Join(e.volDir("pvc-flags"), "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	plain := filepath.Join(t.TempDir(), "plain")
	e.publish(csitest.PublishRequest(vol.GetVolumeId(), plain, vol.GetVolumeContext()))
	defer e.unpublish("pvc-flags", plain)
	if err := exec.CommandContext(ctx(t), filepath.Join(plain, "run.sh")).Run(); err != nil {
		t.Fatalf("executing through a mount without noexec: %v", err)
	}

	target := filepath.Join(t.TempDir(), "noexec")
	req := csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext())
	req.VolumeCapability = csitest.MountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "noexec", "nosuid,nodev")
	e.publish(req)
	defer e.unpublish("pvc-flags", target)
	m := mounted(t, target)
	if len(m) != 1 {
		t.Fatalf("mounts at target: %+v; want 1", m)
	}
	for _, opt := range []string{"noexec", "nosuid", "nodev", "rw"} {
		if !m[0].HasOption(opt) {
			t.Errorf("mount options %q lack %s", m[0].Options, opt)
		}
	}
	err := exec.CommandContext(ctx(t), filepath.Join(target, "run.sh")).Run()
	if !errors.Is(err, syscall.EACCES) {
		t.Errorf("executing through the noexec mount: %v; want EACCES", err)
	}
}

func TestPublishUnsupportedMountFlag(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	vol := e.create("pvc-badflag", MiB, nil)
	for _, flag := range []string{"sync", "uid=1000", "noexec,mand"} {
		t.Run(flag, func(t *testing.T) {
			bad := flag
			if i := strings.LastIndexByte(flag, ','); i >= 0 {
				bad = flag[i+1:]
			}
			target := filepath.Join(t.TempDir(), "mount")
			req := csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext())
			req.VolumeCapability = csitest.MountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, flag)
			_, err := e.c.NodePublishVolume(ctx(t), req)
			grpctest.WantCode(t, err, codes.InvalidArgument, `mount flag "`+bad+`" is not supported`)
			mustNotExist(t, target)

			creq := csitest.CreateRequest("pvc-badflag-create", node, MiB, csitest.PoolParams(poolName))
			creq.VolumeCapabilities = []*csi.VolumeCapability{req.VolumeCapability}
			_, err = e.c.CreateVolume(ctx(t), creq)
			grpctest.WantCode(t, err, codes.InvalidArgument, `mount flag "`+bad+`" is not supported`)
			mustNotExist(t, e.volDir("pvc-badflag-create"))
		})
	}
}
