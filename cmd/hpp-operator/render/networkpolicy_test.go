package render

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// Upstream's NetworkPolicies, spec for spec, as literal YAML: applying
// hpp's over upstream's must change nothing.
func TestNetworkPoliciesAreUpstreams(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Namespace = "openshift-cnv"
	want := map[string]string{
		"hpp-allow-ingress-to-metrics": `ingress:
- ports:
  - port: 8443
    protocol: TCP
podSelector:
  matchLabels:
    prometheus.hostpathprovisioner.kubevirt.io: "true"
policyTypes:
- Ingress
`,
		"hpp-allow-ingress-to-operator-webhook-server": `ingress:
- ports:
  - port: 9443
    protocol: TCP
podSelector:
  matchLabels:
    name: hostpath-provisioner-operator
policyTypes:
- Ingress
`,
	}
	objs := cfg.NetworkPolicies()
	if len(objs) != len(want) {
		t.Fatalf("%d policies, want %d", len(objs), len(want))
	}
	for _, o := range objs {
		np := o.(*networkingv1.NetworkPolicy)
		b, err := yaml.Marshal(np.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if np.Namespace != "openshift-cnv" || string(b) != want[np.Name] {
			t.Errorf("%s/%s spec:\n%s\nwant\n%s", np.Namespace, np.Name, b, want[np.Name])
		}
	}
}
