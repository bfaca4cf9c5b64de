package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// strandedMetric is the node-loss controller's metric
// (cmd/hpp-operator/README.md).
const strandedMetric = "kubevirt_hpp_stranded_volumes"

var (
	operatorBin = &commandBin{name: "hpp-operator"}
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	hppGVR      = schema.GroupVersionResource{Group: "hostpathprovisioner.kubevirt.io", Version: "v1beta1", Resource: "hostpathprovisioners"}
)

// TestNodeLoss: a simulated node holding hpp volumes (CSI and legacy) is
// deleted. hpp-operator's node-loss controller (run alone, as beside a
// csi-only install) reports them at once: an event on each claim, the CR's
// status.strandedVolumes and the kubevirt_hpp_stranded_volumes metric.
// Nothing is deleted without opt-in. The opted-in claim of a 1-replica
// StatefulSet is released after the delay, its pod then runs on the real
// node with a new volume, and the orphaned PV is removed. A second node,
// recreated before its delay, keeps everything.
func TestNodeLoss(t *testing.T) {
	env := needEnv(t)
	ctx := context.Background()
	ns := namespace(t, env)
	dyn, err := dynamic.NewForConfig(env.C.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	installCR(t, dyn)
	startedAt := time.Now()
	metrics := startNodeLossController(t, env)

	const delay, backDelay = 15 * time.Second, 45 * time.Second
	released := storageClass(t, env, kit.StorageClass("nodeloss-release", kit.PoolLocal, func(sc *storagev1.StorageClass) {
		sc.Parameters[contract.AnnReleaseAfterNodeLoss] = delay.String()
	}))
	kept := storageClass(t, env, kit.StorageClass("nodeloss-kept", kit.PoolLocal))
	legacy := storageClass(t, env, legacyClass("nodeloss-legacy"))

	gone := simNodeWithVolumes(t, env, "gone-1", true)
	back := simNodeWithVolumes(t, env, "back-1", false)

	// On gone-1: a StatefulSet (opted in through its class), a claim of a
	// class without opt-in, and a legacy claim.
	sts := nodeLossStatefulSet(ns, "web", released.Name, gone.Name, env.C.RealNode().Name)
	if _, err := env.C.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPVC(t, env, kit.PVC(ns, "kept", kept.Name, "1Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "kept", "sleep 3600", kit.PodVolume{Name: "v", Claim: "kept", Path: "/data"}), gone.Name))
	createPVC(t, env, kit.PVC(ns, "legacy", legacy.Name, "1Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "legacy", "sleep 3600", kit.PodVolume{Name: "v", Claim: "legacy", Path: "/data"}), gone.Name))
	// On back-1: an opted-in claim (its own annotation, a longer delay).
	returns := kit.PVC(ns, "returns", kept.Name, "1Mi")
	returns.Annotations = map[string]string{contract.AnnReleaseAfterNodeLoss: backDelay.String()}
	createPVC(t, env, returns)
	createPod(t, env, kit.OnNode(kit.Pod(ns, "returns", "sleep 3600", kit.PodVolume{Name: "v", Claim: "returns", Path: "/data"}), back.Name))

	oldPV := boundPV(t, env, ns, "data-web-0")
	if node := pvNode(oldPV); node != gone.Name {
		t.Fatalf("the StatefulSet's volume is on node %q, want %s (the scheduler preferred another node)", node, gone.Name)
	}
	keptPV, legacyPV, returnsPV := boundPV(t, env, ns, "kept"), boundPV(t, env, ns, "legacy"), boundPV(t, env, ns, "returns")

	lostAt := time.Now()
	if err := env.C.RemoveSimulatedNode(ctx, gone.Name); err != nil {
		t.Fatal(err)
	}
	if err := env.C.RemoveSimulatedNode(ctx, back.Name); err != nil {
		t.Fatal(err)
	}
	for _, claim := range []string{"data-web-0", "kept", "legacy", "returns"} {
		ev := waitEvent(t, env, ns, "PersistentVolumeClaim", claim, "NodeLost")
		t.Logf("event on claim %s: %s", claim, ev.Message)
		if !strings.Contains(ev.Message, "which was removed at ") || !strings.Contains(ev.Message, "its data is on that node's disk") {
			t.Errorf("NodeLost event on %s: %q", claim, ev.Message)
		}
	}
	waitStranded(t, dyn, gone.Name, 3)
	waitStranded(t, dyn, back.Name, 1)
	waitMetric(t, metrics, fmt.Sprintf(`%s{node="%s",reason="NodeDeleted"} 3`, strandedMetric, gone.Name))
	t.Logf("reported %s after the nodes were deleted", time.Since(lostAt).Round(time.Second))

	// back-1 returns within its delay.
	if _, err := env.C.AddSimulatedCSINode(ctx, back.Name, cluster.SimulatedNodeOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.C.RemoveSimulatedNode(context.Background(), back.Name) })
	waitStranded(t, dyn, back.Name, 0)

	// After the delay: the StatefulSet's pod runs on the real node with a
	// new volume, within 2 minutes.
	releaseAt := lostAt.Add(delay)
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "web-0", corev1.PodRunning, time.Until(releaseAt)+2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("StatefulSet pod Running %s after the delay", time.Since(releaseAt).Round(time.Second))
	pod, err := env.C.Client.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newPV := boundPV(t, env, ns, "data-web-0")
	if pod.Spec.NodeName != env.C.RealNode().Name || newPV.Name == oldPV.Name || pvNode(newPV) != env.C.RealNode().Name {
		t.Errorf("web-0 on %s with PV %s on %s; want the real node %s with a new PV (old %s)",
			pod.Spec.NodeName, newPV.Name, pvNode(newPV), env.C.RealNode().Name, oldPV.Name)
	}
	waitPVGone(t, env, oldPV.Name)
	waitEvent(t, env, "default", "PersistentVolume", oldPV.Name, "VolumeLost")

	// Nothing else was touched: the claims without opt-in, and back-1's
	// claim past its delay. The window must outlast back-1's delay (a
	// timer that survived its node's return would fire then); what was
	// deleted in it is read from the API server's audit log, so a delete
	// of anything, not only of the objects looked up below, fails.
	if wait := time.Until(lostAt.Add(backDelay + 5*time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	deleted, err := cluster.Deletes(env.C.AuditLogPath(), "hpp-operator/", startedAt, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if extra := cluster.Unexpected(deleted, "persistentvolumeclaims "+ns+"/data-web-0", "pods "+ns+"/web-0",
		"persistentvolumes "+oldPV.Name); len(extra) > 0 {
		t.Errorf("the node-loss controller deleted %v; it may delete only web-0's claim, its pod and its orphaned PV (all its deletes: %v)", extra, deleted)
	}
	t.Logf("the node-loss controller's deletes in the window (audit log): %v", deleted)
	for claim, pv := range map[string]string{"kept": keptPV.Name, "legacy": legacyPV.Name, "returns": returnsPV.Name} {
		if _, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s: %v", claim, err)
		}
		if _, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{}); err != nil {
			t.Errorf("PV %s of claim %s: %v", pv, claim, err)
		}
	}
	waitStranded(t, dyn, gone.Name, 2)
	waitStranded(t, dyn, back.Name, 0)
	waitMetric(t, metrics, fmt.Sprintf(`%s{node="%s",reason="NodeDeleted"} 2`, strandedMetric, gone.Name))
}

// simNodeWithVolumes adds a simulated node with hpp-csi (pool local) and,
// when legacy, hpp-legacy.
func simNodeWithVolumes(t *testing.T, env *kit.Env, name string, legacy bool) *cluster.Node {
	t.Helper()
	ctx := context.Background()
	n, err := env.C.AddSimulatedCSINode(ctx, name, cluster.SimulatedNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if env.C.Node(name) != nil {
			_ = env.C.RemoveSimulatedNode(context.Background(), name)
		}
	})
	pool := cluster.Pool{Name: kit.PoolLocal, Path: filepath.Join(n.Dir(), "pools", kit.PoolLocal)}
	if err := n.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: env.HPPCSI, Pools: []cluster.Pool{pool}}); err != nil {
		t.Fatal(err)
	}
	if legacy {
		startLegacy(t, env, n, legacyOptions{})
	}
	return n
}

// nodeLossStatefulSet is one replica that prefers node and may fall back
// only to fallback (the real node, which runs pods). Without the required
// term the scheduler may place the replacement pod on back-1 once it is
// re-added: a simulated node, with no kubelet or provisioner, more free
// resources than the real node and stale capacity objects; the pod would
// stay Pending there (the likely cause of a CI failure of TestNodeLoss
// at 139.8 s, the time this wait gives up).
func nodeLossStatefulSet(ns, name, class, node, fallback string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	pod := kit.Pod(ns, "", "sleep 3600", kit.PodVolume{Name: "data", Claim: "data", Path: "/data"})
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Volumes = nil
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node, fallback}}},
		}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	claim := *kit.PVC(ns, "data", class, "1Mi")
	claim.Namespace = ""
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To[int32](1),
			Selector:             &metav1.LabelSelector{MatchLabels: labels},
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim},
		},
	}
}

// pvNode is the node an hpp-csi PV is pinned to.
func pvNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == contract.TopologyKey || e.Key == corev1.LabelHostname) && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// installCR creates the HostPathProvisioner CRD (deploy/crd) and a CR,
// which the node-loss controller writes its report into; nothing else
// reconciles it here.
func installCR(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	_, self, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "deploy", "crd", "hostpathprovisioner.kubevirt.io_hostpathprovisioners.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}) })
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1", "kind": "HostPathProvisioner",
		"metadata": map[string]any{"name": "hostpath-provisioner"},
		"spec": map[string]any{"imagePullPolicy": "Never",
			"storagePools": []any{map[string]any{"name": kit.PoolLocal, "path": "/var/hpp"}}},
	}}
	err = kit.Poll(ctx, time.Minute, "HostPathProvisioner CRD established and the CR created", func(ctx context.Context) (bool, string, error) {
		_, err := dyn.Resource(hppGVR).Create(ctx, cr, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(hppGVR).Delete(context.Background(), "hostpath-provisioner", metav1.DeleteOptions{})
	})
}

// startNodeLossController runs `hpp-operator --controllers=node-loss` on the
// real node and returns its metrics URL.
func startNodeLossController(t *testing.T, env *kit.Env) string {
	t.Helper()
	metricsPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	healthPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	node := env.C.RealNode()
	proc, err := node.StartProcess(cluster.ProcessSpec{
		Name: "hpp-operator", Path: operatorBin.get(t),
		Args: []string{"--controllers=node-loss", "--namespace=" + cluster.CSINamespace, "--leader-elect=false",
			fmt.Sprintf("--metrics-address=127.0.0.1:%d", metricsPort), fmt.Sprintf("--health-address=127.0.0.1:%d", healthPort)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.StopProcess(context.Background(), "hpp-operator"); err != nil {
			t.Errorf("stop hpp-operator: %v", err)
		}
	})
	err = kit.Poll(context.Background(), time.Minute, "hpp-operator healthy", func(ctx context.Context) (bool, string, error) {
		select {
		case <-proc.Exited():
			return false, "", fmt.Errorf("hpp-operator exited: %w\n%s", proc.ExitError(), proc.Tail(20))
		default:
		}
		code, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthPort))
		if err != nil {
			return false, "", kit.Retry(err)
		}
		return code == 200, body, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
}

// waitStranded waits until the CR's status lists count volumes for node
// (0: the node is not listed).
func waitStranded(t *testing.T, dyn dynamic.Interface, node string, count int64) {
	t.Helper()
	err := kit.Poll(context.Background(), time.Minute, fmt.Sprintf("status.strandedVolumes: %d volume(s) of node %s", count, node), func(ctx context.Context) (bool, string, error) {
		cr, err := dyn.Resource(hppGVR).Get(ctx, "hostpath-provisioner", metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		list, _, _ := unstructured.NestedSlice(cr.Object, "status", "strandedVolumes")
		var got int64
		for _, e := range list {
			m, _ := e.(map[string]any)
			if m["node"] == node {
				got, _, _ = unstructured.NestedInt64(m, "count")
			}
		}
		return got == count, fmt.Sprintf("%v", list), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitMetric waits until the metrics page has the sample line.
func waitMetric(t *testing.T, url, sample string) {
	t.Helper()
	err := kit.Poll(context.Background(), time.Minute, "metric "+sample, func(ctx context.Context) (bool, string, error) {
		_, body, err := httpGet(ctx, url)
		if err != nil {
			return false, "", kit.Retry(err)
		}
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, strandedMetric) {
				lines = append(lines, l)
			}
			if l == sample {
				return true, "", nil
			}
		}
		return false, strings.Join(lines, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
