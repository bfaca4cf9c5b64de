package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Scenario (issue 28): a golden image on simulated node "golden" (its own
// hpp-csi, csi-provisioner and csi-snapshotter, a pool on this machine): a
// 1 GiB sparse disk.img with 200 MiB written in scattered extents, small
// files, a symbolic and a hard link and an xattr. A claim cloned from it
// and a claim restored from its VolumeSnapshot are used by pods on the real
// node, which read back the source's checksums; the golden node's hpp-csi
// sent, and the real node's received, about the bytes the source holds
// (their metrics, within 5%), and the source is unchanged.
func TestCrossNodeCloneAndRestore(t *testing.T) {
	env := needEnv(t)
	if !env.Snapshots {
		testutil.MissingPrerequisite(t, "snapshots are not installed in this cluster: %s", theSuite.noSnapshots)
	}
	ctx := context.Background()
	real := env.C.RealNode().Name
	golden := addPeerNode(t, env, "golden", net.IPv4(127, 0, 0, 2))
	ns := namespace(t, env)
	sc := ns + "-x"
	storageClass(t, env, kit.StorageClass(sc, kit.PoolLocal))

	source := kit.PVC(ns, "golden-image", sc, "2Gi")
	source.Annotations = map[string]string{contract.AnnSelectedNode: golden.Name}
	createPVC(t, env, source)
	pv := boundPV(t, env, ns, "golden-image")
	assertNodeAffinity(t, pv, golden.Name)
	goldenDir := volumeDir(filepath.Join(golden.Dir(), "pools", kit.PoolLocal), pv)
	writeGoldenImage(t, goldenDir)
	want := treeSums(t, goldenDir)
	allocated := allocatedBytes(t, goldenDir)

	dyn := createSnapshot(t, env, ns, "golden-snap", "golden-image")
	waitSnapshotReady(t, env, dyn, ns, "golden-snap")
	t.Cleanup(func() { // before the golden node goes: its drivers delete what it holds
		_ = dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Delete(ctx, "golden-snap", metav1.DeleteOptions{})
		_ = env.C.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "golden-image", metav1.DeleteOptions{})
		waitPVGone(t, env, pv.Name)
	})

	before, sentBefore := receivedBytes(t, env.C.RealNode()), sentBytes(t, golden)
	cloned := kit.PVC(ns, "vm-disk-clone", sc, "2Gi")
	cloned.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "golden-image"}
	createPVC(t, env, cloned)
	restored := kit.PVC(ns, "vm-disk-restore", sc, "2Gi")
	restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "golden-snap"}
	createPVC(t, env, restored)

	for _, claim := range []string{"vm-disk-clone", "vm-disk-restore"} {
		pod := "read-" + claim
		script := "cd /data && find . -type f | sort | xargs sha256sum && readlink link && stat -c '%h %n' hard"
		createPod(t, env, kit.OnNode(kit.Pod(ns, pod, script, kit.PodVolume{Name: "v", Claim: claim, Path: "/data"}), real))
		logs := readBack(t, env, ns, claim, want)
		if !strings.Contains(logs, "small/f0\n") || !strings.Contains(logs, "2 hard") {
			t.Errorf("%s: the links did not come across: %q", claim, logs)
		}
		clonePV := boundPV(t, env, ns, claim)
		assertNodeAffinity(t, clonePV, real)
		dir := volumeDir(env.Pools[kit.PoolLocal], clonePV)
		if v := xattr(t, filepath.Join(dir, "disk.img"), "user.hpp-image"); v != "golden" {
			t.Errorf("%s: xattr user.hpp-image = %q, want golden", claim, v)
		}
		if got := allocatedBytes(t, dir); got > allocated*21/20 {
			t.Errorf("%s holds %d bytes on the real node, the source %d: holes were not kept", claim, got, allocated)
		}
	}
	received := receivedBytes(t, env.C.RealNode()) - before
	t.Logf("golden image: %d bytes allocated (1 GiB apparent); received for the clone and the restore: %d bytes (%.3f of twice the source)",
		allocated, received, float64(received)/float64(2*allocated))
	if lo, hi := 2*allocated*95/100, 2*allocated*105/100; received < lo || received > hi {
		t.Errorf("the real node received %d bytes for two copies of a source holding %d: want within 5%% of %d", received, allocated, 2*allocated)
	}
	// The sender's count, from the golden node's own hpp-csi: what left
	// it, not only what arrived.
	sent := sentBytes(t, golden) - sentBefore
	t.Logf("sent by the golden node: %d bytes (%.3f of twice the source)", sent, float64(sent)/float64(2*allocated))
	if lo, hi := 2*allocated*95/100, 2*allocated*105/100; sent < lo || sent > hi {
		t.Errorf("the golden node sent %d bytes for two copies of a source holding %d: want within 5%% of %d", sent, allocated, 2*allocated)
	}
	if after := treeSums(t, goldenDir); !equalSums(after, want) {
		t.Errorf("the golden image changed during the copies:\n%v\nwas\n%v", after, want)
	}
}

// addPeerNode adds a simulated node at ip with its own hpp-csi (a
// snapshotting "local" pool under its directory, the peer transport on),
// csi-provisioner and csi-snapshotter; removed when the test ends.
func addPeerNode(t *testing.T, env *kit.Env, name string, ip net.IP) *cluster.Node {
	t.Helper()
	n, err := env.AddPeerNode(context.Background(), name, ip, env.Snapshotter)
	if n != nil {
		t.Cleanup(func() {
			if err := env.C.RemoveSimulatedNode(context.Background(), name); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitSnapshotReady(t *testing.T, env *kit.Env, dyn dynamic.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := kit.Poll(ctx, 2*time.Minute, "VolumeSnapshot "+ns+"/"+name+" ReadyToUse", func(ctx context.Context) (bool, string, error) {
		got, err := dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		ready, _, _ := unstructured.NestedBool(got.Object, "status", "readyToUse")
		msg, _, _ := unstructured.NestedString(got.Object, "status", "error", "message")
		return ready, fmt.Sprintf("readyToUse=%v error=%q", ready, msg), nil
	}); err != nil {
		t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, "VolumeSnapshot", name))
	}
}

// writeGoldenImage writes kit.WriteGoldenImage's tree with 200 MiB of
// data in disk.img.
func writeGoldenImage(t *testing.T, dir string) {
	t.Helper()
	if err := kit.WriteGoldenImage(dir, 200); err != nil {
		t.Fatal(err)
	}
}

func treeSums(t *testing.T, dir string) []string {
	t.Helper()
	sums, err := kit.TreeSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

var sumLine = regexp.MustCompile(`^[0-9a-f]{64}  \./\S+$`)

// podSums are sha256sum's lines in the pod's output, as treeSums writes them.
func podSums(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if sumLine.MatchString(l) {
			out = append(out, strings.Replace(l, "  ", " ", 1))
		}
	}
	sort.Strings(out)
	return out
}

func equalSums(a, b []string) bool {
	return len(a) == len(b) && strings.Join(a, "\n") == strings.Join(b, "\n")
}

func allocatedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := kit.AllocatedBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func xattr(t *testing.T, path, name string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(buf[:n])
}

// receivedBytes is the node's hpp_pool_remote_copy_received_bytes_total,
// summed over its pools.
func receivedBytes(t *testing.T, n *cluster.Node) int64 {
	t.Helper()
	return int64(metricSum(t, n, "hpp_pool_remote_copy_received_bytes_total"))
}

// sentBytes is the node's hpp_peer_sent_bytes_total (the peer transport's
// sender side), summed over kinds.
func sentBytes(t *testing.T, n *cluster.Node) int64 {
	t.Helper()
	return int64(metricSum(t, n, "hpp_peer_sent_bytes_total"))
}

func metricSum(t *testing.T, n *cluster.Node, name string) float64 {
	t.Helper()
	v, err := kit.MetricSum(context.Background(), n, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
