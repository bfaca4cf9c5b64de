package takeover

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

const ns = "hostpath-provisioner"

// obj is an object as the API server lists it, written by manager.
func obj(apiVersion, kind, namespace, name, manager string, labels map[string]string, fields map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		o.Object[k] = runtime.DeepCopyJSONValue(v)
	}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(namespace)
	o.SetName(name)
	o.SetLabels(labels)
	if manager != "" {
		o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: apiVersion}})
	}
	return o
}

var upLabels = map[string]string{ManagedByLabel: upstreamManagedBy}

func selector(k, v string) map[string]any {
	return map[string]any{"spec": map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{k: v}},
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{k: v}}, "spec": map[string]any{"containers": []any{
			map[string]any{"name": "c", "ports": []any{
				map[string]any{"name": "webhook", "containerPort": int64(9443)},
				map[string]any{"name": "metrics", "containerPort": int64(8443)},
				map[string]any{"name": "health", "containerPort": int64(8081)},
			}},
		}}},
	}}
}

// upstreamInstall is what upstream's deploy/ and operator leave: its
// kubectl-create objects, the CR, the CSI DaemonSet, a long pool's claim
// and mounter (upstream's hashed names), its webhook, PVs with xfs.
func upstreamInstall() []runtime.Object {
	pool := map[string]any{"name": "local", "path": "/var/hpvolumes"}
	return []runtime.Object{
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", CRDName, KubectlCreateManager, nil, nil),
		obj("hostpathprovisioner.kubevirt.io/v1beta1", "HostPathProvisioner", "", "hostpath-provisioner", KubectlCreateManager, nil,
			map[string]any{"spec": map[string]any{"storagePools": []any{pool, map[string]any{"name": "Bad_Name", "path": "/var/bad"}}}}),
		obj("apps/v1", "Deployment", ns, OperatorName, KubectlCreateManager, nil, selector("name", OperatorName)),
		obj("v1", "ServiceAccount", ns, OperatorName, KubectlCreateManager, nil, nil),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", OperatorName, KubectlCreateManager, nil, nil),
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", WebhookConfigName, KubectlCreateManager, nil,
			map[string]any{"webhooks": []any{map[string]any{"name": "validate-hostpath-provisioner.kubevirt.io"}}}),
		obj("v1", "Service", ns, upstreamWebhookService, KubectlCreateManager, nil, nil),
		obj("v1", "Secret", ns, upstreamWebhookSecret, "cert-manager-certificates-issuing", nil, nil),
		obj("apps/v1", "DaemonSet", ns, CSIDaemonSetName, UpstreamOperatorManager, upLabels, nil),
		obj("apps/v1", "Deployment", ns, "hpp-pool-653b815e", UpstreamOperatorManager, upLabels, selector("hpp-pool", "x")),
		obj("v1", "PersistentVolumeClaim", ns, "hpp-pool-653b815e", UpstreamOperatorManager, upLabels, nil),
		obj("storage.k8s.io/v1", "CSIDriver", "", CSIDriverName, UpstreamOperatorManager, upLabels, nil),
		obj("storage.k8s.io/v1", "StorageClass", "", "hostpath-csi", KubectlCreateManager, nil, map[string]any{"provisioner": CSIDriverName}),
		obj("storage.k8s.io/v1", "StorageClass", "", "standard", KubectlCreateManager, nil, map[string]any{"provisioner": "other"}),
		obj("v1", "PersistentVolume", "", "pvc-1", "csi-provisioner", nil, map[string]any{"spec": map[string]any{
			"csi": map[string]any{"driver": CSIDriverName, "volumeHandle": "pvc-1", "fsType": "xfs", "volumeAttributes": map[string]any{contract.ParamStoragePool: "local"}}}}),
		obj("v1", "PersistentVolume", "", "pvc-2", "csi-provisioner", nil, map[string]any{"spec": map[string]any{
			"csi": map[string]any{"driver": CSIDriverName, "volumeHandle": "pvc-2", "fsType": "xfs", "volumeAttributes": map[string]any{contract.ParamStoragePool: "gone"}}}}),
		obj("v1", "ConfigMap", ns, "kube-root-ca.crt", "kube-controller-manager", nil, nil),
	}
}

// hppManifests is hpp's operator install as kubectl kustomize prints it.
func hppManifests() []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		obj("v1", "ServiceAccount", ns, OperatorName, "", nil, nil),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", OperatorName, "", nil, nil),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", CRDName, "", nil, nil),
		obj("apps/v1", "Deployment", ns, OperatorName, "", nil, selector("k8s-app", OperatorName)),
		obj("v1", "Service", ns, "hostpath-provisioner-operator-webhook", "", nil, nil),
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", WebhookConfigName, "", nil,
			map[string]any{"webhooks": []any{map[string]any{"name": "validate.hostpathprovisioner.kubevirt.io"}}}),
	}
}

func fakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), objs...)
}

// listKinds are the list kinds of every resource the takeover reads.
func listKinds() map[schema.GroupVersionResource]string {
	lists := map[schema.GroupVersionResource]string{}
	for _, r := range append(Resources, append(manifestResources, rPod)...) {
		lists[r.GVR] = r.Kind + "List"
	}
	return lists
}

func assess(t *testing.T, objs ...runtime.Object) *Plan {
	t.Helper()
	inv, err := Collect(context.Background(), fakeClient(objs...), ns, hppManifests())
	if err != nil {
		t.Fatal(err)
	}
	return Assess(inv)
}

func actions(p *Plan) map[string]Action {
	out := map[string]Action{}
	for _, it := range p.Items {
		out[it.String()] = it.Action
	}
	return out
}

func TestPlanClassifiesUpstreamsObjects(t *testing.T) {
	p := assess(t, upstreamInstall()...)
	want := map[string]Action{
		"CustomResourceDefinition " + CRDName:                      Adopted,
		"HostPathProvisioner hostpath-provisioner":                 Adopted,
		"Deployment " + ns + "/" + OperatorName:                    Replaced,
		"ServiceAccount " + ns + "/" + OperatorName:                Adopted,
		"ClusterRole " + OperatorName:                              Adopted,
		"ValidatingWebhookConfiguration " + WebhookConfigName:      Replaced,
		"Service " + ns + "/" + upstreamWebhookService:             Removed,
		"DaemonSet " + ns + "/" + CSIDaemonSetName:                 Rolled,
		"Deployment " + ns + "/hpp-pool-653b815e":                  Rolled,
		"PersistentVolumeClaim " + ns + "/hpp-pool-653b815e":       Adopted,
		"CSIDriver " + CSIDriverName:                               Adopted,
		"StorageClass hostpath-csi":                                Left,
		"Service " + ns + "/hostpath-provisioner-operator-webhook": Created,
	}
	got := actions(p)
	for ref, a := range want {
		if got[ref] != a {
			t.Errorf("%s: %q, want %q", ref, got[ref], a)
		}
	}
	for _, never := range []string{"StorageClass standard", "ConfigMap " + ns + "/kube-root-ca.crt", "PersistentVolume pvc-1"} {
		if _, ok := got[never]; ok {
			t.Errorf("%s listed (%s): not upstream's, not hpp's", never, got[never])
		}
	}
	// The Secret cert-manager wrote is upstream's webhook too.
	if got["Secret "+ns+"/"+upstreamWebhookSecret] != Removed {
		t.Errorf("webhook Secret: %q, want removed", got["Secret "+ns+"/"+upstreamWebhookSecret])
	}
	if !p.Go() {
		t.Errorf("no-go: %v", p.NoGo)
	}
	wantFindings(t, "PVs", p.PVs, `2 PVs carry fsType "xfs"`, `PV pvc-2: pool "gone" is not in the CR`)
	wantFindings(t, "CR fields", p.CRFields, `spec.storagePools[1].name`)
	wantFindings(t, "field managers", p.Managers, "CustomResourceDefinition "+CRDName+": kubectl create's fields are handed to \"kubectl\"")
	wantFindings(t, "NetworkPolicies", p.NetworkPolicies, "no NetworkPolicy in "+ns)
}

func wantFindings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, w)
		}
		if !found {
			t.Errorf("%s: no finding containing %q in %q", what, w, got)
		}
	}
}

func TestPlanNoGo(t *testing.T) {
	t.Run("no CR", func(t *testing.T) {
		var objs []runtime.Object
		for _, o := range upstreamInstall() {
			if o.(*unstructured.Unstructured).GetKind() != "HostPathProvisioner" {
				objs = append(objs, o)
			}
		}
		p := assess(t, objs...)
		wantFindings(t, "no-go", p.NoGo, "no HostPathProvisioner in the cluster")
	})
	t.Run("name collision", func(t *testing.T) {
		objs := append(upstreamInstall(), obj("v1", "Service", ns, "hostpath-provisioner-operator-webhook", "helm", nil, nil))
		p := assess(t, objs...)
		wantFindings(t, "collisions", p.Collisions, "Service "+ns+"/hostpath-provisioner-operator-webhook exists and neither")
		wantFindings(t, "no-go", p.NoGo, "1 name collisions")
	})
	t.Run("webhook port denied", func(t *testing.T) {
		deny := obj("networking.k8s.io/v1", "NetworkPolicy", ns, "default-deny", "kubectl-create", nil,
			map[string]any{"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}}})
		metrics := obj("networking.k8s.io/v1", "NetworkPolicy", ns, "hpp-allow-ingress-to-metrics", "kubectl-create", nil,
			map[string]any{"spec": map[string]any{"podSelector": map[string]any{}, "ingress": []any{
				map[string]any{"ports": []any{map[string]any{"port": int64(8443)}}}}}})
		p := assess(t, append(upstreamInstall(), deny, metrics)...)
		wantFindings(t, "NetworkPolicies", p.NetworkPolicies, "port 8443 (metrics): allowed by hpp-allow-ingress-to-metrics", "port 9443 (webhook): no NetworkPolicy allows it")
		wantFindings(t, "no-go", p.NoGo, "hpp's webhook port 9443 is not reachable")
		// hpp's install brings its own allow rule for the webhook.
		inv, err := Collect(context.Background(), fakeClient(append(upstreamInstall(), deny, metrics)...), ns, append(hppManifests(),
			obj("networking.k8s.io/v1", "NetworkPolicy", ns, "hpp-allow-ingress-to-operator-webhook-server", "", nil,
				map[string]any{"spec": map[string]any{"podSelector": map[string]any{}, "ingress": []any{
					map[string]any{"ports": []any{map[string]any{"port": int64(9443)}}}}}})))
		if err != nil {
			t.Fatal(err)
		}
		if p := Assess(inv); !p.Go() {
			t.Errorf("with hpp's own webhook NetworkPolicy: no-go %v", p.NoGo)
		}
	})
	t.Run("resumed switch", func(t *testing.T) {
		var objs []runtime.Object
		for _, o := range upstreamInstall() {
			u := o.(*unstructured.Unstructured)
			if u.GetKind() == "Deployment" && u.GetName() == OperatorName {
				u = obj("apps/v1", "Deployment", ns, OperatorName, ApplyManager, nil, selector("k8s-app", OperatorName))
			}
			objs = append(objs, u)
		}
		p := assess(t, objs...)
		if !p.Resumed || !p.Go() || actions(p)["Deployment "+ns+"/"+OperatorName] != Adopted {
			t.Errorf("resumed %v, no-go %v, operator %q; want a resumed go with hpp's operator adopted", p.Resumed, p.NoGo, actions(p)["Deployment "+ns+"/"+OperatorName])
		}
	})
}

// TestManifestPortsAsKustomizePrintsThem reads the operator's Deployment
// from YAML text, as `kubectl kustomize | hpp-migrate takeover -f -` gives
// it: its ports keep their numbers (decoded as float64 they read as 0, and
// the plan called the webhook port 0 unreachable: a false no-go).
func TestManifestPortsAsKustomizePrintsThem(t *testing.T) {
	objs, err := ReadManifests(strings.NewReader(`---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hostpath-provisioner-operator
  namespace: hostpath-provisioner
spec:
  template:
    spec:
      containers:
      - name: operator
        ports:
        - {name: webhook, containerPort: 9443}
        - {name: metrics, containerPort: 8443}
---
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("got %d objects, want 1", len(objs))
	}
	got := containerPorts(objs[0])
	want := []namedPort{{"webhook", 9443}, {"metrics", 8443}}
	if !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
}
