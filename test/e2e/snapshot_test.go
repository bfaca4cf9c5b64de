package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// createSnapshot creates VolumeSnapshot ns/name of claim and returns the
// dynamic client the test follows it with.
func createSnapshot(t *testing.T, env *kit.Env, ns, name, claim string) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.C.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Create(context.Background(), kit.VolumeSnapshot(ns, name, claim), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dyn
}

// Scenario: snapshots and clones with the real control plane,
// snapshot-controller and csi-snapshotter in node-deployment mode. A pod
// writes a file; a VolumeSnapshot of its claim becomes ReadyToUse; the
// file is changed; a claim restored from the snapshot has the old content
// and a claim cloned from the first has the new one, both on the same node
// and each in its own directory.
func TestSnapshotRestoreAndClone(t *testing.T) {
	env := needEnv(t)
	if !env.Snapshots {
		testutil.MissingPrerequisite(t, "snapshots are not installed in this cluster: %s", theSuite.noSnapshots)
	}
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	sc := ns + "-snap"
	storageClass(t, env, kit.StorageClass(sc, kit.PoolLocal))
	vol := kit.PodVolume{Name: "v", Claim: "source", Path: "/data"}

	createPVC(t, env, kit.PVC(ns, "source", sc, "64Mi"))
	run(t, env, kit.OnNode(kit.Pod(ns, "writer", "echo at-snapshot > /data/file && mkdir /data/dir && ln -s ../file /data/dir/link", vol), node))
	source := boundPV(t, env, ns, "source")

	dyn := createSnapshot(t, env, ns, "snap", "source")
	var handle string
	if err := kit.Poll(ctx, 2*time.Minute, "VolumeSnapshot "+ns+"/snap ReadyToUse", func(ctx context.Context) (bool, string, error) {
		got, err := dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Get(ctx, "snap", metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		ready, _, _ := unstructured.NestedBool(got.Object, "status", "readyToUse")
		msg, _, _ := unstructured.NestedString(got.Object, "status", "error", "message")
		content, _, _ := unstructured.NestedString(got.Object, "status", "boundVolumeSnapshotContentName")
		handle = content
		return ready, fmt.Sprintf("readyToUse=%v content=%q error=%q", ready, content, msg), nil
	}); err != nil {
		t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, "VolumeSnapshot", "snap"))
	}
	// The snapshot is in the pool's snapshot area on this node, with the
	// source's content at snapshot time.
	entries, _ := os.ReadDir(filepath.Join(env.Pools[kit.PoolLocal], "csi", ".hpp-snapshots"))
	var snapDir string
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".hpp-staging" && e.Name() != ".hpp-trash" {
			snapDir = filepath.Join(env.Pools[kit.PoolLocal], "csi", ".hpp-snapshots", e.Name())
		}
	}
	if snapDir == "" {
		t.Fatalf("no snapshot in the local pool's snapshot area (content %s)", handle)
	}
	if got := readFile(t, filepath.Join(snapDir, "data", "file")); got != "at-snapshot\n" {
		t.Fatalf("snapshot data = %q", got)
	}

	run(t, env, kit.OnNode(kit.Pod(ns, "changer", "echo after-snapshot > /data/file", vol), node))
	deletePodNow(t, env, ns, "writer")
	deletePodNow(t, env, ns, "changer")

	restored := kit.PVC(ns, "restored", sc, "64Mi")
	restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	createPVC(t, env, restored)
	cloned := kit.PVC(ns, "cloned", sc, "64Mi")
	cloned.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
	createPVC(t, env, cloned)

	for claim, want := range map[string]string{"restored": "at-snapshot\n", "cloned": "after-snapshot\n"} {
		pod := "read-" + claim
		run(t, env, kit.OnNode(kit.Pod(ns, pod, "cat /data/file /data/dir/link", kit.PodVolume{Name: "v", Claim: claim, Path: "/data"}), node))
		if logs, err := kit.PodLogs(ctx, env.C.Client, ns, pod); err != nil || logs != want+want {
			t.Errorf("%s: pod read %q (%v), want %q twice (file and link)", claim, logs, err, want)
		}
		pv := boundPV(t, env, ns, claim)
		assertNodeAffinity(t, pv, node)
		if pv.Spec.CSI.VolumeHandle == source.Spec.CSI.VolumeHandle {
			t.Errorf("%s shares the source's volume", claim)
		}
		if got := readFile(t, filepath.Join(volumeDir(env.Pools[kit.PoolLocal], pv), "file")); got != want {
			t.Errorf("%s on the host = %q, want %q", claim, got, want)
		}
	}
}

// run creates a pod and waits for it to succeed.
func run(t *testing.T, env *kit.Env, pod *corev1.Pod) {
	t.Helper()
	createPod(t, env, pod)
	if _, err := kit.WaitPodPhase(context.Background(), env.C.Client, pod.Namespace, pod.Name, corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}
