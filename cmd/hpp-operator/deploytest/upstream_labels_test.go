package deploytest

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The operator install carries what upstream's NetworkPolicies and
// Prometheus select: the operator pod's labels (upstream's literal values),
// its metrics port 8443, and both NetworkPolicies in the install namespace.
func TestOperatorInstallIsReachableAsUpstreams(t *testing.T) {
	objs := buildInNamespace(t, "operator", "openshift-cnv")
	found := map[string]bool{}
	for _, u := range objs {
		switch {
		case u.GetKind() == "NetworkPolicy":
			found[u.GetName()] = u.GetNamespace() == "openshift-cnv"
		case u.GetKind() == "Deployment" && u.GetName() == "hostpath-provisioner-operator":
			found["deployment"] = true
			labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
			for k, v := range map[string]string{
				"name": "hostpath-provisioner-operator",
				"prometheus.hostpathprovisioner.kubevirt.io":   "true",
				"np.kubevirt.io/allow-access-cluster-services": "true",
			} {
				if labels[k] != v {
					t.Errorf("operator pod label %s=%q; want upstream's %q", k, labels[k], v)
				}
			}
			ports := map[string]int64{}
			for _, c := range containers(podSpec(u)) {
				ps, _, _ := unstructured.NestedSlice(c, "ports")
				for _, p := range ps {
					m := p.(map[string]any)
					ports[m["name"].(string)] = m["containerPort"].(int64)
				}
			}
			if ports["metrics"] != 8443 || ports["webhook"] != 9443 {
				t.Errorf("operator ports %v; want metrics 8443 and webhook 9443 (upstream's NetworkPolicies open those)", ports)
			}
		}
	}
	for _, n := range []string{"deployment", "hpp-allow-ingress-to-metrics", "hpp-allow-ingress-to-operator-webhook-server"} {
		if !found[n] {
			t.Errorf("operator install lacks %s in openshift-cnv (found %v)", n, found)
		}
	}
}
