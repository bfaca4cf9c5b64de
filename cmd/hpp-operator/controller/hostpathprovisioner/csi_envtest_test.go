package hostpathprovisioner_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func TestPoolsCRInstallsCSIDriverAndSteadyStateWritesNothing(t *testing.T) {
	h := start(t, "hpp-csi-install")
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"},
		hppv1.StoragePool{Name: "fast", Path: "/mnt/fast"})
	cr.Spec.Workload = hppv1.NodePlacement{
		NodeSelector: map[string]string{"hpp": "yes"},
		Tolerations:  []corev1.Toleration{{Key: "storage", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	h.create(cr)
	ns := h.cfg.Namespace
	ds := &appsv1.DaemonSet{}
	eventually(t, "CSI DaemonSet created", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds)
	})

	// The DaemonSet as the issue describes it.
	if got := ds.Spec.Selector.MatchLabels; len(got) != 1 || got[render.AppLabel] != render.CSIDaemonSetName {
		t.Errorf("selector holds more than the stable app label: %v", got)
	}
	if !metav1.IsControlledBy(ds, cr) && ds.OwnerReferences[0].Name != "hpp" {
		t.Errorf("DaemonSet not owned by the CR: %v", ds.OwnerReferences)
	}
	pod := ds.Spec.Template.Spec
	if pod.NodeSelector["hpp"] != "yes" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "storage" {
		t.Errorf("workload placement not applied: nodeSelector %v tolerations %v", pod.NodeSelector, pod.Tolerations)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccomp profile: %+v", pod.SecurityContext)
	}
	names := []string{}
	for _, c := range pod.Containers {
		names = append(names, c.Name)
		if len(c.Resources.Requests) == 0 || len(c.Resources.Limits) != 0 {
			t.Errorf("container %s: want requests and no limits, got %+v", c.Name, c.Resources)
		}
		if c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("container %s: pull policy %s, want the CR's Never", c.Name, c.ImagePullPolicy)
		}
	}
	if !slices.Equal(names, []string{render.CSIContainerName, "csi-provisioner"}) {
		t.Errorf("containers %v: want hpp-csi and csi-provisioner only (no registrar/livenessprobe sidecars by default)", names)
	}
	drv := pod.Containers[0]
	if drv.Image != "localhost/hpp-csi:test" {
		t.Errorf("driver image %s", drv.Image)
	}
	wantArgs := map[string]string{
		"--drivername":                contract.DriverName,
		"--endpoint":                  "unix:///csi/csi.sock",
		"--nodeid":                    "$(NODE_NAME)",
		"--version":                   "v9.9.9-test",
		"--datadir":                   "$(PV_DIR)",
		"--kubelet-registration-path": "/var/lib/kubelet/plugins/" + contract.DriverName + "/csi.sock",
		"--health-address":            ":9898",
		"--check-binding-mode":        "",
	}
	for f, v := range wantArgs {
		if got, ok := argValue(drv.Args, f); !ok || got != v {
			t.Errorf("hpp-csi %s = %q (present %v), want %q; args %v", f, got, ok, v, drv.Args)
		}
	}
	var pvDir string
	for _, e := range drv.Env {
		if e.Name == "PV_DIR" {
			pvDir = e.Value
		}
	}
	if want := `[{"name":"local","path":"/local-data-dir/csi"},{"name":"fast","path":"/fast-data-dir/csi"}]`; pvDir != want {
		t.Errorf("PV_DIR = %s, want %s", pvDir, want)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	if hostPaths["local-data-dir"] != "/var/hpp" || hostPaths["fast-data-dir"] != "/mnt/fast" {
		t.Errorf("pool volumes: %v", hostPaths)
	}
	prov := pod.Containers[1]
	for _, f := range []string{"--node-deployment", "--enable-capacity", "--capacity-ownerref-level", "--strict-topology", "--immediate-topology", "--extra-create-metadata", "--kube-api-qps", "--kube-api-burst", "--worker-threads"} {
		if _, ok := argValue(prov.Args, f); !ok {
			t.Errorf("csi-provisioner lacks %s: %v", f, prov.Args)
		}
	}
	if v, _ := argValue(prov.Args, "--immediate-topology"); v != "false" {
		t.Errorf("--immediate-topology=%s, want false", v)
	}

	// Identities, permissions, CSIDriver.
	sa := &corev1.ServiceAccount{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIServiceAccount}, sa); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{}
	if err := h.get(client.ObjectKey{Name: render.CSIServiceAccount}, crb); err != nil {
		t.Fatal(err)
	}
	if s := crb.Subjects; len(s) != 1 || s[0].Namespace != ns || s[0].Name != render.CSIServiceAccount {
		t.Errorf("ClusterRoleBinding subjects %v: want the SA in %s", s, ns)
	}
	role := &rbacv1.Role{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIServiceAccount}, role); err != nil {
		t.Fatal(err)
	}
	if !hasRule(role.Rules, "storage.k8s.io", "csistoragecapacities", "create") {
		t.Errorf("Role lacks csistoragecapacities create: %v", role.Rules)
	}
	clusterRole := &rbacv1.ClusterRole{}
	if err := h.get(client.ObjectKey{Name: render.CSIServiceAccount}, clusterRole); err != nil {
		t.Fatal(err)
	}
	if hasRule(clusterRole.Rules, "storage.k8s.io", "csistoragecapacities", "create") {
		t.Errorf("ClusterRole grants csistoragecapacities cluster-wide: %v", clusterRole.Rules)
	}
	for _, r := range clusterRole.Rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") {
			t.Errorf("wildcard rule %v", r)
		}
	}
	csiDriver := &storagev1.CSIDriver{}
	if err := h.get(client.ObjectKey{Name: contract.DriverName}, csiDriver); err != nil {
		t.Fatal(err)
	}
	sp := csiDriver.Spec
	if *sp.AttachRequired || !*sp.PodInfoOnMount || !*sp.StorageCapacity || *sp.FSGroupPolicy != storagev1.FileFSGroupPolicy ||
		!slices.Equal(sp.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{"Persistent", "Ephemeral"}) {
		t.Errorf("CSIDriver spec %+v", sp)
	}
	if len(csiDriver.OwnerReferences) != 0 {
		t.Errorf("CSIDriver has owner references %v: it must outlive the CR while PVs exist", csiDriver.OwnerReferences)
	}

	// Not available until the DaemonSet controller says every pod is ready.
	eventually(t, "Progressing=True", func() error {
		c, err := h.cond("hpp", hppv1.ConditionProgressing)
		if err != nil {
			return err
		}
		if c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Progressing %s", c.Status)
		}
		return nil
	})
	// envtest runs no controller-manager: play the DaemonSet controller.
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, 2)
	waitAvailable(t, h, "hpp")
	eventually(t, "status complete", func() error {
		cur := &hppv1.HostPathProvisioner{}
		if err := h.get(client.ObjectKey{Name: "hpp"}, cur); err != nil {
			return err
		}
		c := cur.Status.FindCondition(hppv1.ConditionAvailable)
		if c == nil || c.Status != corev1.ConditionTrue || c.Message != "2 of 2 node pods ready" {
			return fmt.Errorf("Available %+v", c)
		}
		if cur.Status.ObservedVersion != "v9.9.9-test" || cur.Status.OperatorVersion != "v9.9.9-test" {
			return fmt.Errorf("versions %+v", cur.Status)
		}
		if len(cur.Status.StoragePoolStatuses) != 2 || cur.Status.StoragePoolStatuses[0].Phase != hppv1.StoragePoolReady {
			return fmt.Errorf("pool statuses %+v", cur.Status.StoragePoolStatuses)
		}
		if !slices.Contains(cur.Finalizers, hostpathprovisioner.Finalizer) {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})

	if v := gauge(t, "kubevirt_hpp_cr_ready"); v != 1 {
		t.Errorf("kubevirt_hpp_cr_ready = %v while Available, want 1", v)
	}

	assertSteadyStateWritesNothing(t, h, "hpp")
}

func gauge(t *testing.T, name string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// assertSteadyStateWritesNothing runs the reconciler directly through a
// request-counting client that reads from the manager's cache: once the
// cache has caught up, a reconcile with nothing to change must send no
// request at all.
func assertSteadyStateWritesNothing(t *testing.T, h *harness, name string) {
	t.Helper()
	var counter testenv.Counter
	counted, err := client.New(counter.Wrap(restCfg), client.Options{Scheme: h.scheme,
		Cache: &client.CacheOptions{Reader: h.mgr.GetCache()}})
	if err != nil {
		t.Fatal(err)
	}
	// A read past the cache (takeover's) is a request too.
	live, err := client.New(counter.Wrap(restCfg), client.Options{Scheme: h.scheme})
	if err != nil {
		t.Fatal(err)
	}
	r := *h.rec
	r.Client = counted
	r.APIReader = live
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}
	settled := false
	for range 100 {
		counter.Reset()
		_, err := r.Reconcile(h.ctx, req)
		if n, _ := counter.Writes(); n == 0 && err == nil {
			settled = true
			break
		}
		time.Sleep(100 * time.Millisecond) // let the cache see our own writes
	}
	if !settled {
		_, w := counter.Writes()
		t.Fatalf("the reconciler never settled; last writes: %v", w)
	}
	for i := range 3 {
		counter.Reset()
		if _, err := r.Reconcile(h.ctx, req); err != nil {
			t.Fatalf("steady-state reconcile: %v", err)
		}
		n, w := counter.Writes()
		total := counter.Total()
		t.Logf("steady-state reconcile %d: %d API requests, %d writes", i+1, total, n)
		if n != 0 || total != 0 {
			t.Errorf("steady-state reconcile %d sent %d requests (%d writes): %v", i+1, total, n, w)
		}
	}
}

func waitAvailable(t *testing.T, h *harness, name string) {
	t.Helper()
	eventually(t, "Available=True", func() error {
		c, err := h.cond(name, hppv1.ConditionAvailable)
		if err != nil {
			return err
		}
		if c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Available %+v", c)
		}
		return nil
	})
}

func setDaemonSetReady(t *testing.T, h *harness, ns, name string, nodes int32) {
	t.Helper()
	eventually(t, "DaemonSet status written", func() error {
		ds := &appsv1.DaemonSet{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: name}, ds); err != nil {
			return err
		}
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: nodes,
			CurrentNumberScheduled: nodes, NumberReady: nodes, NumberAvailable: nodes, UpdatedNumberScheduled: nodes}
		return h.admin.Status().Update(h.ctx, ds)
	})
}

func hasRule(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}
