package onnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// kubectl runs the cluster's kubectl as admin with stdin and returns its
// combined output.
func (e *env) kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.bins.Kubectl, append([]string{"--kubeconfig=" + e.c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// render builds deploy/overlays/<overlay> through a kustomization of the
// test's own that names the overlay as its resource and points images: at
// the local images (with the overlay's images-in-env configuration where
// it has one, so the operator's *_IMAGE values follow), as a user
// installing from a mirror would. Then upstreamPath becomes pool: a
// directory inside the cluster's.
func (e *env) render(ctx context.Context, t *testing.T, overlay, pool string) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "deploy", "overlays", overlay)
	dir := t.TempDir()
	// kustomize takes only relative paths (outside the root with
	// LoadRestrictionsNone below).
	rel, err := filepath.Rel(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	var k strings.Builder
	// The install namespace first: the overlays leave it out
	// (deploy/README.md), and the test's removal deletes it too.
	fmt.Fprintf(&k, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\n- %s\n",
		filepath.Join(rel, "..", "..", "base", "namespace"), rel)
	if _, err := os.Stat(filepath.Join(src, "images-in-env.yaml")); err == nil {
		fmt.Fprintf(&k, "configurations:\n- %s\n", filepath.Join(rel, "images-in-env.yaml"))
	}
	name, tag, _ := strings.Cut(provisionerImage, ":")
	fmt.Fprintf(&k, "images:\n- name: %s\n  newName: %s\n  newTag: %s\n", upstreamProvName, name, tag)
	name, tag, _ = strings.Cut(resizerImage, ":")
	fmt.Fprintf(&k, "- name: %s\n  newName: %s\n  newTag: %s\n", upstreamResName, name, tag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The overlay lives outside the test's kustomization root.
	out, err := e.kubectl(ctx, "", "kustomize", "--load-restrictor=LoadRestrictionsNone", dir)
	if err != nil {
		t.Fatal(err)
	}
	if pool != "" {
		if !strings.Contains(out, upstreamPath) {
			t.Fatalf("overlay %s: rendered manifests do not mention %s, which the test moves into the cluster directory", overlay, upstreamPath)
		}
		out = strings.ReplaceAll(out, upstreamPath, pool)
	}
	for _, upstream := range []string{upstreamProvName, upstreamResName} {
		if strings.Contains(out, upstream) {
			t.Fatalf("overlay %s: %s left after kustomize images:", overlay, upstream)
		}
	}
	return out
}

// apply applies manifests server-side, retrying while a webhook that the
// same install starts is not serving yet.
func (e *env) apply(ctx context.Context, t *testing.T, what, manifests string) {
	t.Helper()
	err := kit.Poll(ctx, 2*time.Minute, "apply "+what, func(ctx context.Context) (bool, string, error) {
		if _, err := e.kubectl(ctx, manifests, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
			return false, "", kit.Retry(err)
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied %s", what)
}

// remove deletes manifests and waits until every object is gone.
func (e *env) remove(ctx context.Context, t *testing.T, what, manifests string) {
	t.Helper()
	e.stopWorkloads(ctx, t)
	if _, err := e.kubectl(ctx, manifests, "delete", "--ignore-not-found", "--wait", "--timeout=3m", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted %s", what)
}

// waitDaemonSetReady waits until the DaemonSet's pod runs and is ready on
// the one node; on timeout the error carries the pods' states and events.
func (e *env) waitDaemonSetReady(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := kit.Poll(ctx, 3*time.Minute, "DaemonSet "+name+" ready", func(ctx context.Context) (bool, string, error) {
		ds, err := e.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		s := ds.Status
		ready := s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == 1 && s.NumberReady == 1 && s.UpdatedNumberScheduled == 1
		return ready, e.podStates(ctx), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DaemonSet %s ready", name)
}

// podStates sums up the install namespace's pods, for timeout errors.
func (e *env) podStates(ctx context.Context) string {
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for i := range pods.Items {
		p := &pods.Items[i]
		parts = append(parts, p.Name+": "+kit.PodSummary(p)+" events: "+kit.Events(ctx, e.c.Client, namespace, "Pod", p.Name))
	}
	return strings.Join(parts, "; ")
}

// podLogs is the tail of every container's log in the install namespace,
// for the failure message of a wait that timed out: the pods' states say
// that an operator runs, only its log says why it does nothing.
func (e *env) podLogs(ctx context.Context) string {
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	tail := int64(25)
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, c := range p.Spec.Containers {
			raw, err := e.c.Client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				raw = []byte(err.Error())
			}
			fmt.Fprintf(&b, "--- %s/%s ---\n%s\n", p.Name, c.Name, raw)
		}
	}
	return b.String()
}

// waitRegistered waits until kubelet lists the driver on the node's
// CSINode: the driver's pod registered with kubelet's plugin watcher.
func (e *env) waitRegistered(ctx context.Context, t *testing.T) {
	t.Helper()
	node := e.c.RealNode().Name
	err := kit.Poll(ctx, 2*time.Minute, "CSINode "+node+" lists "+contract.DriverName, func(ctx context.Context) (bool, string, error) {
		cn, err := e.c.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		var names []string
		for _, d := range cn.Spec.Drivers {
			if d.Name == contract.DriverName && d.NodeID == node {
				return true, "", nil
			}
			names = append(names, d.Name)
		}
		return false, fmt.Sprintf("drivers %v", names), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubelet registered %s on %s", contract.DriverName, node)
}

// writeThroughClaim creates a claim of class and a pod that writes a line
// into it, checks the line in the file on the node's disk (volumeDir
// names the volume's directory from its PV), then deletes pod and claim
// and checks the directory is gone (reclaim policy Delete).
func (e *env) writeThroughClaim(ctx context.Context, t *testing.T, class string, volumeDir func(*corev1.PersistentVolume) string) {
	t.Helper()
	ns := e.testNamespace(ctx, t)
	client := e.c.Client
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, "data", class, "10Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const line = "written by a pod on the real node"
	pod := kit.Pod(ns, "writer", "echo '"+line+"' > /data/file && sync", kit.PodVolume{Name: "data", Claim: "data", Path: "/data"})
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kit.WaitPodPhase(ctx, client, ns, "writer", corev1.PodSucceeded, 3*time.Minute); err != nil {
		t.Fatalf("%v\ninstall: %s", err, e.podStates(ctx))
	}
	pvc, err := kit.WaitPVCBound(ctx, client, ns, "data", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := volumeDir(pv)
	got, err := os.ReadFile(filepath.Join(dir, "file"))
	if err != nil {
		t.Fatalf("the pod's file on the node: %v", err)
	}
	if strings.TrimSpace(string(got)) != line {
		t.Fatalf("%s holds %q, want %q", filepath.Join(dir, "file"), got, line)
	}
	t.Logf("pod wrote %q through PV %s into %s", line, pv.Name, dir)
	if err := client.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kit.WaitGone(ctx, "PV "+pv.Name, 2*time.Minute, func(ctx context.Context) error {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("volume directory %s after its PV was deleted: %v (want it gone)", dir, err)
	}
	t.Logf("PV %s deleted, %s gone", pv.Name, dir)
}

// testNamespace creates a namespace for one subtest's claim and pod and
// deletes it at the subtest's end.
func (e *env) testNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns, err := e.c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "onnode-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The default ServiceAccount must exist before a pod is admitted.
	if err := kit.Poll(ctx, time.Minute, "default ServiceAccount in "+ns.Name, func(ctx context.Context) (bool, string, error) {
		_, err := e.c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := e.c.Client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// createClass creates a StorageClass and deletes it when the subtest ends.
func (e *env) createClass(ctx context.Context, t *testing.T, sc *storagev1.StorageClass) {
	t.Helper()
	if _, err := e.c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := e.c.Client.StorageV1().StorageClasses().Delete(context.WithoutCancel(ctx), sc.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete StorageClass %s: %v", sc.Name, err)
		}
	})
}

// waitDeploymentAvailable waits for a Deployment's Available condition.
func (e *env) waitDeploymentAvailable(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := kit.Poll(ctx, 3*time.Minute, "Deployment "+name+" Available", func(ctx context.Context) (bool, string, error) {
		d, err := e.c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, e.podStates(ctx), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Deployment %s Available", name)
}
