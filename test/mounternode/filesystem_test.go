package mounternode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// kubeletPod is where a kubelet mounts a pod's volume on the host.
const kubeletPod = "/var/lib/kubelet/pods/2f1d0c1e-mounter/volumes"

// A filesystem PVC (a local PV: a directory on the node's disk) is found on
// the host by device and root, not by its path, and bind-mounted onto the
// pool path; another pod's volume on the same disk is not taken for it.
func TestFilesystemPVCFoundFromMountinfo(t *testing.T) {
	host := hostRoot(t)
	data, other := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "existing"), []byte("pvc data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A decoy first in mountinfo: same disk, another directory.
	bind(t, other, filepath.Join(host, "/var/lib/kubelet/pods/0-other/volumes/kubernetes.io~local-volume/pv-other"))
	kubelet := filepath.Join(host, kubeletPod, "kubernetes.io~local-volume/pv-pool")
	bind(t, data, kubelet)
	source := filepath.Join(t.TempDir(), "source") // the container's /source
	bind(t, data, source)

	target := filepath.Join(host, poolTarget)
	p := start(t, "--storagePoolPath", source, "--mountPath", poolTarget, "--hostPath", host)
	m := waitMounted(t, p, target)
	want := mountsAt(t, kubelet)[0]
	if len(m) != 1 || m[0].Major != want.Major || m[0].Minor != want.Minor || m[0].Root != want.Root {
		t.Fatalf("mounts at %s = %+v; want one bind of %s (root %s)", target, m, kubelet, want.Root)
	}
	if !strings.Contains(p.output(), kubelet) {
		t.Errorf("the log does not name the kubelet's mount %s it bound from:\n%s", kubelet, p.output())
	}
	if got, err := os.ReadFile(filepath.Join(target, "existing")); err != nil || string(got) != "pvc data" {
		t.Errorf("PVC file through the pool path: %q, %v", got, err)
	}
	// The marker is on the PVC's storage, not on the OS disk under the mount.
	if _, err := os.Stat(filepath.Join(data, ".hpp-pool")); err != nil {
		t.Errorf("marker not on the PVC: %v", err)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("exit code after SIGTERM = %d", code)
	}
	if m := mountsAt(t, target); len(m) != 0 {
		t.Errorf("still mounted after SIGTERM: %+v", m)
	}
	if len(mountsAt(t, kubelet)) != 1 || len(mountsAt(t, source)) != 1 {
		t.Error("the kubelet's own mounts of the PVC were touched")
	}
}

// An NFS-like PVC: a filesystem without a block device whose source reads
// server:/export (a tmpfs here), mounted twice by the kubelet (global mount
// and per-pod bind), as CSI NFS and CephFS volumes are. Matched by device
// number and root; the duplicates are fine.
func TestNFSLikeSourceMatchedWithoutDevice(t *testing.T) {
	host := hostRoot(t)
	global := filepath.Join(host, "/var/lib/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/4f3e/globalmount")
	if err := os.MkdirAll(global, 0o755); err != nil {
		t.Fatal(err)
	}
	const nfsSource = "nfs.example.com:/exports/pool"
	if err := unix.Mount(nfsSource, global, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount tmpfs %q: %v", nfsSource, err)
	}
	podMount := filepath.Join(host, kubeletPod, "kubernetes.io~csi/pv-nfs/mount")
	bind(t, global, podMount)
	source := filepath.Join(t.TempDir(), "source")
	bind(t, podMount, source)

	target := filepath.Join(host, poolTarget)
	p := start(t, "--storagePoolPath", source, "--mountPath", poolTarget, "--hostPath", host)
	m := waitMounted(t, p, target)
	if len(m) != 1 || m[0].FSType != "tmpfs" || m[0].Source != nfsSource {
		t.Fatalf("mounts at %s = %+v; want one mount of %s", target, m, nfsSource)
	}
	if err := os.WriteFile(filepath.Join(target, "vm.img"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(global, "vm.img")); err != nil {
		t.Errorf("a file written at the pool path is not on the PVC: %v", err)
	}
}

// A pool path that is already mounted from something else is refused:
// nothing is stacked on it and nothing is unmounted.
func TestTargetMountedFromElsewhereIsRefused(t *testing.T) {
	host := hostRoot(t)
	data := t.TempDir()
	bind(t, data, filepath.Join(host, kubeletPod, "kubernetes.io~local-volume/pv-pool"))
	source := filepath.Join(t.TempDir(), "source")
	bind(t, data, source)
	target := filepath.Join(host, poolTarget)
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("someone-else", target, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, "--storagePoolPath", source, "--mountPath", poolTarget, "--hostPath", host)
	if code != 3 || !strings.Contains(out, "refused: "+poolTarget+" is already mounted from "+target+" (tmpfs, source someone-else") ||
		!strings.Contains(out, "hpp-mounter does not stack mounts") {
		t.Errorf("exit %d, output:\n%s\nwant exit 3 and a refusal naming the other mount", code, out)
	}
	if m := mountsAt(t, target); len(m) != 1 || m[0].Source != "someone-else" {
		t.Errorf("mounts at %s = %+v; want the other mount alone, untouched", target, m)
	}
}

// unmount peels stacked mounts (as upstream's mounter left them), and a
// second run, or one on a path that was never mounted, is fine.
func TestUnmountPeelsAndIsSafeTwice(t *testing.T) {
	host := hostRoot(t)
	target := filepath.Join(host, poolTarget)
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := unix.Mount("stacked", target, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	for i, args := range [][]string{
		{"unmount", "--mountPath", poolTarget, "--hostPath", host},
		{"unmount", "--mountPath", poolTarget, "--hostPath", host},
		{"--unmount", "--mountPath", poolTarget, "--hostPath", host}, // upstream's spelling
		{"unmount", "--mountPath", "/never/mounted/csi", "--hostPath", host},
	} {
		if code, out := runOnce(t, args...); code != 0 {
			t.Errorf("run %d (%v): exit %d:\n%s", i+1, args, code, out)
		}
		if m := mountsAt(t, target); len(m) != 0 {
			t.Fatalf("run %d: still mounted: %+v", i+1, m)
		}
	}
}
