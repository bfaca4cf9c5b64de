package deploytest

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// servedVersions are the API versions Kubernetes v1.37 serves for what hpp
// installs, plus the CRDs' own; anything else (a removed beta) breaks an
// install.
var servedVersions = []string{
	"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "storage.k8s.io/v1",
	"admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1",
	"hostpathprovisioner.kubevirt.io/v1beta1", "cert-manager.io/v1",
	"security.openshift.io/v1", "monitoring.coreos.com/v1", "snapshot.storage.k8s.io/v1", "networking.k8s.io/v1",
}

func TestEveryOverlayRendersInstallableObjects(t *testing.T) {
	for _, name := range overlays(t) {
		t.Run(name, func(t *testing.T) {
			objs := buildOverlay(t, name)
			t.Logf("%s: %d objects", name, len(objs))
			checkInstallable(t, objs)
		})
	}
}

// checkInstallable checks what breaks an install: API versions, the
// ServiceAccounts pods and bindings name, images through images:, the
// DaemonSets' selectors.
func checkInstallable(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	sas := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "ServiceAccount" {
			sas[u.GetNamespace()+"/"+u.GetName()] = true
		}
	}
	for _, u := range objs {
		if !slices.Contains(servedVersions, u.GetAPIVersion()) {
			t.Errorf("%s: apiVersion %s is not served by Kubernetes v1.37 (or not allowed here)", id(u), u.GetAPIVersion())
		}
		checkServiceAccounts(t, u, sas)
		for where, img := range images(u) {
			// A placeholder name left alone by images: has no
			// registry and no tag.
			if !strings.Contains(img, "/") || !strings.Contains(img, ":") {
				t.Errorf("%s: image %q did not go through the overlay's images: list", where, img)
			}
		}
		if u.GetKind() == "DaemonSet" {
			sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
			if len(sel) != 1 || sel["k8s-app"] == "" {
				t.Errorf("%s: selector %v: only the stable k8s-app label belongs there", id(u), sel)
			}
		}
	}
}

func checkServiceAccounts(t *testing.T, u *unstructured.Unstructured, sas map[string]bool) {
	t.Helper()
	if spec := podSpec(u); spec != nil {
		sa, _ := spec["serviceAccountName"].(string)
		if sa == "" {
			sa = "default"
		}
		if sa != "default" && !sas[u.GetNamespace()+"/"+sa] {
			t.Errorf("%s: ServiceAccount %s/%s is not in the overlay", id(u), u.GetNamespace(), sa)
		}
	}
	if k := u.GetKind(); k == "RoleBinding" || k == "ClusterRoleBinding" {
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		for _, s := range subjects {
			m, _ := s.(map[string]any)
			// prometheus-k8s is the cluster's Prometheus (components/monitoring
			// grants it discovery), not something the overlay installs.
			if m["kind"] == "ServiceAccount" && m["name"] != "prometheus-k8s" && !sas[m["namespace"].(string)+"/"+m["name"].(string)] {
				t.Errorf("%s: subject ServiceAccount %s/%s is not in the overlay", id(u), m["namespace"], m["name"])
			}
		}
	}
}

// TestNamespaceChangesInOnePlace: with namespace: set once over an
// overlay, the default namespace is left nowhere (bindings, webhook
// Service reference, cert-manager names included).
func TestNamespaceChangesInOnePlace(t *testing.T) {
	const ns = "storage-system"
	for _, name := range overlays(t) {
		t.Run(name, func(t *testing.T) {
			for _, u := range buildInNamespace(t, name, ns) {
				if u.GetKind() == "Namespace" {
					if u.GetName() != ns {
						t.Errorf("Namespace %s rendered, want %s", u.GetName(), ns)
					}
					continue
				}
				// Object names and labels may contain "hostpath-provisioner";
				// only namespace positions matter.
				for _, hit := range hasString(u.Object, "hostpath-provisioner/") {
					if v := hit[strings.Index(hit, "=")+1:]; strings.HasPrefix(v, "hostpath-provisioner/") {
						t.Errorf("%s: hard-coded namespace left: %s", id(u), hit)
					}
				}
				for _, hit := range hasString(u.Object, ".hostpath-provisioner.svc") {
					t.Errorf("%s: hard-coded namespace left: %s", id(u), hit)
				}
				if u.GetNamespace() == "hostpath-provisioner" {
					t.Errorf("%s: still in namespace hostpath-provisioner", id(u))
				}
				for _, path := range [][]string{{"subjects"}, {"webhooks"}} {
					list, _, _ := unstructured.NestedSlice(u.Object, path...)
					for _, item := range list {
						m, _ := item.(map[string]any)
						if m["namespace"] == "hostpath-provisioner" {
							t.Errorf("%s: %s namespace left: %v", id(u), path[0], m)
						}
						if svc, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace"); svc != "" && svc != ns {
							t.Errorf("%s: webhook service namespace %s", id(u), svc)
						}
					}
				}
			}
		})
	}
}
