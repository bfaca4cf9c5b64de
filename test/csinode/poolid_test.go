package csinode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// A volume records its pool's identity; a new disk mounted at the pool's
// path, or the marker recreated on the old one, gives the pool a new
// identity, and publishing the old volume is refused with the error users
// see (FailedPrecondition) and a volume health condition. A volume without
// an identity (made before identities, or by the KubeVirt driver)
// publishes as today.
func TestPoolIdentityRefusesAVolumeOfAnotherDisk(t *testing.T) {
	disk := csitest.Tmpfs(t, 64*MiB, 0)
	e := newEnv(t, disk)
	vols := filepath.Join(disk, csitest.VolumesSubdir)
	first := readMarker(t, vols)
	old := e.create("pvc-old", MiB, nil)
	if got := old.GetVolumeContext()[contract.VolumeContextPoolID]; got != first.ID || len(got) != 36 {
		t.Fatalf("volume context %v, want %s=%s (the pool marker's)", old.GetVolumeContext(), contract.VolumeContextPoolID, first.ID)
	}
	// As upstream's driver (or hpp before identities) made it: no identity.
	noID := e.create("pvc-noid", MiB, nil).GetVolumeContext()
	delete(noID, contract.VolumeContextPoolID)
	target := func(name string) string { return filepath.Join(t.TempDir(), name) }
	a := target("a")
	e.publish(csitest.PublishRequest("pvc-old", a, old.GetVolumeContext()))
	writeFile(t, filepath.Join(a, "data"), 4096)
	e.unpublish("pvc-old", a)

	refused := func(phase string, now poolmarker.Marker) {
		t.Helper()
		want := fmt.Sprintf("volume %q was created in storage pool %q with pool identity %s, but the pool at %s on node %s now has identity %s: "+
			"its disk was replaced or re-created since (a new disk at the same path, or a node recreated under the same name), so the volume's data is not there; "+
			"hpp-csi does not publish an empty directory in its place. Mount the original disk back, or delete the claim so a new volume is made",
			"pvc-old", poolName, first.ID, vols, node, now.ID)
		b := target("b")
		_, err := e.c.NodePublishVolume(ctx(t), csitest.PublishRequest("pvc-old", b, old.GetVolumeContext()))
		grpctest.WantCode(t, err, codes.FailedPrecondition, want)
		t.Logf("%s: NodePublishVolume = %v", phase, err)
		if m := mounted(t, b); len(m) != 0 {
			t.Errorf("%s: refused publish left mounts at %s: %v", phase, b, m)
		}
		h, err := e.c.NodeGetVolumeHealth(ctx(t), &csi.NodeGetVolumeHealthRequest{VolumeId: "pvc-old"})
		if err != nil {
			t.Fatal(err)
		}
		s := h.GetVolumeHealth().GetHealthStatuses()
		if len(s) != 1 || s[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE || s[0].GetReason() != "PoolIdentityChanged" || s[0].GetMessage() != want {
			t.Errorf("%s: volume health %v, want INACCESSIBLE PoolIdentityChanged", phase, s)
		}
	}

	// A new disk at the same path (a node recreated under its name).
	if err := e.d.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", disk, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(disk, unix.MNT_DETACH) })
	if err := e.d.Restart(); err != nil {
		t.Fatal(err)
	}
	second := readMarker(t, vols)
	if second.ID == first.ID {
		t.Fatalf("the new disk's marker has the old identity %s", first.ID)
	}
	refused("new disk", second)

	// The original disk, but its marker re-created: the identity changed
	// all the same; a volume without identity still publishes.
	if err := e.d.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(disk, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(poolmarker.Path(vols)); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Restart(); err != nil {
		t.Fatal(err)
	}
	third := readMarker(t, vols)
	refused("marker re-created", third)
	c := target("c")
	e.publish(csitest.PublishRequest("pvc-noid", c, noID))
	if m := mounted(t, c); len(m) != 1 {
		t.Errorf("volume without identity: mounts at %s = %v, want one bind mount", c, m)
	}
	e.unpublish("pvc-noid", c)
}

func readMarker(t *testing.T, dir string) poolmarker.Marker {
	t.Helper()
	m, err := poolmarker.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ID) != 36 || m.CreatedBy != "hpp-csi" {
		t.Fatalf("pool marker %+v: want one hpp-csi made, with a UUID", m)
	}
	return m
}
