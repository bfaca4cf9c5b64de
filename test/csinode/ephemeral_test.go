package csinode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// kubelet's id for an inline ephemeral volume: "csi-" and a sha256 in hex.
const ephemeralID = "csi-5f2b8a4e0c9d1e7f3a6b2c8d4e0f1a7b3c9d5e1f7a3b9c5d1e7f3a9b5c1d7e3f"

// The volume context kubelet sends for an inline volume.
func ephemeralContext(podUID string) map[string]string {
	return map[string]string{
		csitest.EphemeralKey:                     "true",
		csitest.PodUIDKey:                        podUID,
		"csi.storage.k8s.io/pod.name":            "web-0",
		"csi.storage.k8s.io/pod.namespace":       "default",
		"csi.storage.k8s.io/serviceAccount.name": "default",
		contract.ParamStoragePool:                poolName,
	}
}

// An inline ephemeral volume is created by publish, marked ephemeral in its
// metadata, and removed with its data by unpublish.
func TestEphemeralLifecycle(t *testing.T) {
	forEachPoolKind(t, func(t *testing.T, poolPath string) {
		e := newEnv(t, poolPath)
		target := filepath.Join(t.TempDir(), "mount")
		e.publish(csitest.PublishRequest(ephemeralID, target, ephemeralContext("pod-uid-1")))

		fi, err := os.Stat(e.volDir(ephemeralID))
		if err != nil || !fi.IsDir() {
			t.Fatalf("ephemeral volume directory: %v", err)
		}
		meta := e.readMeta(ephemeralID)
		if meta["kind"] != "ephemeral" || meta["id"] != ephemeralID {
			t.Errorf("meta of the ephemeral volume = %v; want kind ephemeral, id %s", meta, ephemeralID)
		}
		if attrs, _ := meta["attributes"].(map[string]any); attrs[csitest.PodUIDKey] != "pod-uid-1" {
			t.Errorf("meta attributes = %v; want the pod uid recorded", meta["attributes"])
		}
		if len(mounted(t, target)) != 1 {
			t.Fatalf("target %s is not mounted", target)
		}
		if err := os.WriteFile(filepath.Join(target, "scratch"), []byte("pod data"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(e.volDir(ephemeralID), "scratch")); err != nil {
			t.Fatalf("file written through the target is not in the volume: %v", err)
		}
		// A repeated publish (kubelet retry) keeps the same volume.
		e.publish(csitest.PublishRequest(ephemeralID, target, ephemeralContext("pod-uid-1")))
		if _, err := os.Stat(filepath.Join(target, "scratch")); err != nil {
			t.Errorf("after a repeated publish the data is not visible: %v", err)
		}

		e.unpublish(ephemeralID, target)
		mustNotExist(t, target)
		mustNotExist(t, e.volDir(ephemeralID))
		if e.hasRecord(ephemeralID) {
			t.Errorf("record of %s left after unpublish", ephemeralID)
		}
		if left := csitest.Purged(filepath.Join(e.pool, "csi")); len(left) != 0 {
			t.Errorf("trash after deleting the ephemeral volume: %v", left)
		}
		e.unpublish(ephemeralID, target) // idempotent
	})
}

// A persistent volume whose id looks like kubelet's ephemeral ids is never
// deleted by unpublish, and cannot be taken over as an ephemeral volume.
func TestPersistentVolumeWithEphemeralLookingID(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	vol := e.create(ephemeralID, MiB, nil)
	target := filepath.Join(t.TempDir(), "mount")
	e.publish(csitest.PublishRequest(ephemeralID, target, vol.GetVolumeContext()))
	if err := os.WriteFile(filepath.Join(target, "keep"), []byte("persistent"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.unpublish(ephemeralID, target)
	if got, err := os.ReadFile(filepath.Join(e.volDir(ephemeralID), "keep")); err != nil || string(got) != "persistent" {
		t.Fatalf("persistent volume data after unpublish: %q, %v; want it kept", got, err)
	}
	if meta := e.readMeta(ephemeralID); meta["kind"] != "persistent" {
		t.Errorf("meta kind = %v; want persistent", meta["kind"])
	}

	other := filepath.Join(t.TempDir(), "inline")
	_, err := e.c.NodePublishVolume(ctx(t), csitest.PublishRequest(ephemeralID, other, ephemeralContext("pod-uid-2")))
	grpctest.WantCode(t, err, codes.AlreadyExists, ephemeralID, "persistent volume")
	e.unpublish(ephemeralID, other)
	if _, err := os.Stat(filepath.Join(e.volDir(ephemeralID), "keep")); err != nil {
		t.Errorf("persistent volume lost its data after a refused ephemeral publish: %v", err)
	}
}

// A directory made by the KubeVirt driver (no meta file) with a csi- name is
// treated as persistent: unpublish keeps it.
func TestUnpublishKeepsVolumeWithoutMeta(t *testing.T) {
	e := newEnv(t, csitest.Tmpfs(t, 64*MiB, 0))
	dir := e.volDir(ephemeralID)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old"), []byte("from the KubeVirt driver"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "mount")
	req := csitest.PublishRequest(ephemeralID, target, nil)
	req.VolumeCapability = csitest.MountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	e.publish(req)
	e.unpublish(ephemeralID, target)
	if _, err := os.Stat(filepath.Join(dir, "old")); err != nil {
		t.Errorf("volume without meta lost its data on unpublish: %v", err)
	}
}
