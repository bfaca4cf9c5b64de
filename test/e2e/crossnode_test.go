package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
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

	dyn, err := dynamic.NewForConfig(env.C.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	snap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": "golden-snap", "namespace": ns},
		"spec": map[string]any{"volumeSnapshotClassName": cluster.SnapshotClassName,
			"source": map[string]any{"persistentVolumeClaimName": "golden-image"}},
	}}
	if _, err := dyn.Resource(volumeSnapshots).Namespace(ns).Create(ctx, snap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSnapshotReady(t, env, dyn, ns, "golden-snap")
	t.Cleanup(func() { // before the golden node goes: its drivers delete what it holds
		_ = dyn.Resource(volumeSnapshots).Namespace(ns).Delete(ctx, "golden-snap", metav1.DeleteOptions{})
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
		if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, pod, corev1.PodSucceeded, 5*time.Minute); err != nil {
			t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim))
		}
		logs, err := kit.PodLogs(ctx, env.C.Client, ns, pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := podSums(logs); !equalSums(got, want) {
			t.Errorf("%s: the pod on %s read\n%v\nwant the golden image's\n%v", claim, real, got, want)
		}
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
	ctx := context.Background()
	n, err := env.C.AddSimulatedCSINode(ctx, name, cluster.SimulatedNodeOptions{InternalIP: ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.C.RemoveSimulatedNode(context.Background(), name); err != nil {
			t.Error(err)
		}
	})
	peerArgs, err := env.C.PeerArgs(n, ip)
	if err != nil {
		t.Fatal(err)
	}
	pool := cluster.Pool{Name: kit.PoolLocal, Path: filepath.Join(n.Dir(), "pools", kit.PoolLocal), SnapshotProvider: "reflink"}
	if err := n.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: env.HPPCSI, Pools: []cluster.Pool{pool}, DriverArgs: peerArgs}); err != nil {
		t.Fatal(err)
	}
	if err := n.StartCSISnapshotter(*env.Snapshotter); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitSnapshotReady(t *testing.T, env *kit.Env, dyn dynamic.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := kit.Poll(ctx, 2*time.Minute, "VolumeSnapshot "+ns+"/"+name+" ReadyToUse", func(ctx context.Context) (bool, string, error) {
		got, err := dyn.Resource(volumeSnapshots).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
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

// writeGoldenImage writes what a VM image claim holds: disk.img, 1 GiB
// apparent with 200 MiB in 50 scattered 4 MiB extents, an xattr on it,
// small files, a symbolic and a hard link.
func writeGoldenImage(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "disk.img"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(28, 28))
	extent := make([]byte, 4<<20)
	for i := range 50 {
		for j := range extent {
			extent[j] = byte(rng.Uint32())
		}
		// Extents 20 MiB apart, each shifted by up to 8 MiB: scattered,
		// never overlapping, some unaligned.
		off := int64(i)*(20<<20) + rng.Int64N(8<<20)
		if _, err := f.WriteAt(extent, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(dir, "disk.img"), "user.hpp-image", []byte("golden"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "small"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(dir, "small", "f"+strconv.Itoa(i)), []byte(strings.Repeat(strconv.Itoa(i), 1000+i)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("small/f0", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "small", "f1"), filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
}

// treeSums is "sha256 ./path" for every regular file under dir, sorted.
func treeSums(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, hex.EncodeToString(h.Sum(nil))+" ./"+rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
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

// allocatedBytes is what the files under dir hold on disk (st_blocks),
// each inode once.
func allocatedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
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

// metricSum sums the series of the counter name on n's hpp-csi.
func metricSum(t *testing.T, n *cluster.Node, name string) float64 {
	t.Helper()
	text, err := n.HPPCSIMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		total += v
	}
	return total
}
