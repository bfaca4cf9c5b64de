package onnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// testCSIOnly: deploy/overlays/csi-only, its pool moved into the cluster
// directory. The DaemonSet's hpp-csi registers with kubelet itself (no
// registrar sidecar) and its csi-provisioner, using in-cluster
// configuration, provisions the claim of the overlay's StorageClass.
func (e *env) testCSIOnly(t *testing.T) {
	ctx := t.Context()
	pool := filepath.Join(e.pools, "csi-only")
	manifests := e.render(ctx, t, "csi-only", pool)
	e.apply(ctx, t, "overlay csi-only", manifests)
	e.waitDaemonSetReady(ctx, t, csiDaemonSet)
	e.waitRegistered(ctx, t)
	// hostpath-csi: deploy/base/csi-driver's example class, pool "local".
	e.writeThroughClaim(ctx, t, "hostpath-csi", func(pv *corev1.PersistentVolume) string {
		return filepath.Join(pool, "csi", pv.Spec.CSI.VolumeHandle)
	})
	e.waitDeploymentAvailable(ctx, t, resizerName)
	e.expandInUse(ctx, t, "hostpath-csi")
	e.remove(ctx, t, "overlay csi-only", manifests)
}

// testLegacy: deploy/overlays/legacy (the legacy base), PV_DIR moved into
// the cluster directory; the hostPath PV's directory is <PV_DIR>/<pv>.
func (e *env) testLegacy(t *testing.T) {
	ctx := t.Context()
	pvDir := filepath.Join(e.pools, "legacy")
	manifests := e.render(ctx, t, "legacy", pvDir)
	e.apply(ctx, t, "overlay legacy", manifests)
	e.waitDaemonSetReady(ctx, t, legacyDS)
	e.writeThroughClaim(ctx, t, "hostpath-provisioner", func(pv *corev1.PersistentVolume) string {
		return filepath.Join(pvDir, pv.Name)
	})
	e.remove(ctx, t, "overlay legacy", manifests)
}

// testOperator: deploy/overlays/operator installs hpp-operator as a
// Deployment (its webhook called by kube-apiserver for every CR below);
// a storagePools CR, then a pathConfig CR, each proven by a pod writing
// through a provisioned volume; deleting each CR removes everything the
// operator made and no data directory.
func (e *env) testOperator(t *testing.T) {
	ctx := t.Context()
	manifests := e.render(ctx, t, "operator", "")
	e.apply(ctx, t, "overlay operator", manifests)
	e.waitDeploymentAvailable(ctx, t, operatorName)

	t.Run("storagePools CR", func(t *testing.T) {
		pool := filepath.Join(e.pools, "operator-local")
		e.applyCR(ctx, t, fmt.Sprintf(`  storagePools:
  - name: local
    path: %s
`, pool))
		e.waitDaemonSetReady(ctx, t, csiDaemonSet)
		e.waitRegistered(ctx, t)
		e.webhookRefusesSecondCR(ctx, t)
		e.createClass(ctx, t, kit.StorageClass("onnode-operator-local", "local"))
		e.writeThroughClaim(ctx, t, "onnode-operator-local", func(pv *corev1.PersistentVolume) string {
			return filepath.Join(pool, "csi", pv.Spec.CSI.VolumeHandle)
		})
		e.deleteCR(ctx, t, pool, filepath.Join(pool, "csi"))
	})

	t.Run("pathConfig CR", func(t *testing.T) {
		path := filepath.Join(e.pools, "operator-legacy")
		e.applyCR(ctx, t, fmt.Sprintf(`  pathConfig:
    path: %s
    useNamingPrefix: false
`, path))
		// A pathConfig CR runs hpp-legacy beside the CSI driver.
		e.waitDaemonSetReady(ctx, t, legacyDS)
		e.waitDaemonSetReady(ctx, t, csiDaemonSet)
		e.createClass(ctx, t, &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: "onnode-operator-legacy"},
			Provisioner:       contract.LegacyProvisionerName,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		})
		e.writeThroughClaim(ctx, t, "onnode-operator-legacy", func(pv *corev1.PersistentVolume) string {
			return filepath.Join(path, pv.Name)
		})
		e.deleteCR(ctx, t, path)
	})

	e.remove(ctx, t, "overlay operator", manifests)
}

// applyCR applies the HostPathProvisioner with spec (indented YAML) and
// waits for its Available condition.
func (e *env) applyCR(ctx context.Context, t *testing.T, spec string) {
	t.Helper()
	applied := time.Now()
	e.apply(ctx, t, "HostPathProvisioner "+crName, crManifest(spec))
	if _, err := e.kubectl(ctx, "", "wait", "--for=condition=Available", "--timeout=4m", "hostpathprovisioner/"+crName); err != nil {
		status, _ := e.kubectl(ctx, "", "get", "hostpathprovisioner/"+crName, "-o", "jsonpath={.status}")
		t.Fatalf("%v\nstatus: %s\ninstall: %s", err, status, e.podStates(ctx))
	}
	// Available means every node pod is Ready (the operator's status).
	t.Logf("HostPathProvisioner %s Available %s after it was applied", crName, time.Since(applied).Round(100*time.Millisecond))
}

// webhookRefusesSecondCR: kube-apiserver calls the operator's webhook
// through its Service (kube-proxy routes the ClusterIP), and only the
// webhook can refuse a second HostPathProvisioner (no CRD rule sees other
// objects): the refusal proves the call, not just an allowed default.
func (e *env) webhookRefusesSecondCR(ctx context.Context, t *testing.T) {
	t.Helper()
	second := strings.Replace(crManifest("  storagePools:\n  - name: other\n    path: /var/other\n"), "name: "+crName, "name: second", 1)
	out, err := e.kubectl(ctx, second, "create", "-f", "-")
	// The webhook's own words: it answers with a structured Invalid
	// status, which kubectl prints without the "admission webhook" prefix.
	const want = "already exists and hpp runs from exactly one"
	if err == nil || !strings.Contains(err.Error()+out, want) {
		t.Fatalf("second HostPathProvisioner: %v %s; want the webhook's refusal (%s)", err, out, want)
	}
	t.Logf("second HostPathProvisioner refused by the webhook through its Service")
}

// crManifest is the HostPathProvisioner with spec (indented YAML).
func crManifest(spec string) string {
	return fmt.Sprintf(`apiVersion: hostpathprovisioner.kubevirt.io/v1beta1
kind: HostPathProvisioner
metadata:
  name: %s
spec:
  imagePullPolicy: IfNotPresent
%s`, crName, spec)
}

// operatorKinds are the kinds the operator makes objects of.
const operatorKinds = "daemonsets,deployments,jobs,services,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings,csidrivers,storageclasses,configmaps,secrets"

// operatorObjects lists every object carrying the operator's managed-by
// label.
func (e *env) operatorObjects(ctx context.Context, t *testing.T) []string {
	t.Helper()
	out, err := e.kubectl(ctx, "", "get", operatorKinds, "--all-namespaces", "-l", "app.kubernetes.io/managed-by=hpp-operator", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// deleteCR deletes the CR, waits until it is gone (its finalizer done),
// then checks that nothing the operator made is left and that every data
// directory in keep still exists.
func (e *env) deleteCR(ctx context.Context, t *testing.T, keep ...string) {
	t.Helper()
	made := e.operatorObjects(ctx, t)
	if len(made) == 0 {
		t.Fatal("no object with the operator's managed-by label while the CR is Available")
	}
	t.Logf("the operator made %d objects: %s", len(made), strings.Join(made, " "))
	if _, err := e.kubectl(ctx, "", "delete", "hostpathprovisioner/"+crName, "--wait", "--timeout=4m"); err != nil {
		t.Fatal(err)
	}
	// The finalizer deletes with background propagation: pods of the
	// DaemonSets may take a moment longer.
	// The peer CA Secret and its bundle belong to the operator, not to the
	// CR (contract.PeerCASecret): they stay, so that a new CR's node
	// plugins trust the certificates they were given.
	operatorOwn := map[string]bool{"secret/" + contract.PeerCASecret: true, "configmap/" + contract.PeerCABundle: true}
	err := kit.Poll(ctx, 2*time.Minute, "the operator's objects gone", func(ctx context.Context) (bool, string, error) {
		var left []string
		kept := 0
		for _, o := range e.operatorObjects(ctx, t) {
			if operatorOwn[o] {
				kept++
				continue
			}
			left = append(left, o)
		}
		if kept != len(operatorOwn) {
			return false, "", fmt.Errorf("the operator's own peer CA objects %v: %d of them left after the CR was deleted, want all (they outlive a CR)", operatorOwn, kept)
		}
		pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=hpp-operator"})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for _, p := range pods.Items {
			left = append(left, "pod/"+p.Name)
		}
		return len(left) == 0, strings.Join(left, " "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range keep {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("data directory %s after the CR was deleted: %v (want it kept)", dir, err)
		}
	}
	t.Logf("CR deleted: none of the %d objects left, data directories kept: %s", len(made), strings.Join(keep, " "))
}

// testNoForbidden reads kube-apiserver's audit log: no request of a
// ServiceAccount of the install namespace (the operator, hpp-csi,
// csi-provisioner, hpp-legacy) was refused with 403 by authorization, so
// the RBAC of every overlay covers every call the components really made.
func (e *env) testNoForbidden(t *testing.T) {
	prefix := "system:serviceaccount:" + namespace + ":"
	requests := map[string]int{}
	forbidden := map[string]int{}
	terminating := 0
	err := cluster.ReadAuditLog(e.c.AuditLogPath(), func(ev *cluster.AuditEvent) {
		if !strings.HasPrefix(ev.User.Username, prefix) {
			return
		}
		requests[ev.User.Username]++
		switch {
		case ev.ResponseStatus.Code != 403:
		case ev.Terminating():
			terminating++
		default:
			forbidden[ev.User.Username+" "+ev.Verb+" "+ev.RequestURI+": "+ev.ResponseStatus.Message]++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) == 0 {
		t.Fatalf("no request by a ServiceAccount of %s in %s: the audit log does not show the components", namespace, e.c.AuditLogPath())
	}
	users := make([]string, 0, len(requests))
	for u, n := range requests {
		users = append(users, fmt.Sprintf("%s: %d", strings.TrimPrefix(u, prefix), n))
	}
	sort.Strings(users)
	t.Logf("requests per ServiceAccount: %s; refused because their namespace was being deleted (not RBAC): %d",
		strings.Join(users, ", "), terminating)
	if len(forbidden) > 0 {
		var lines []string
		for k, n := range forbidden {
			lines = append(lines, fmt.Sprintf("%dx %s", n, k))
		}
		sort.Strings(lines)
		t.Fatalf("%d kinds of request forbidden (403):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	t.Logf("403 responses to the components: 0")
}
