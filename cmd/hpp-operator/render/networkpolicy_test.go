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

// The peer port is open to the node plugins alone, as literal YAML; the
// policy selects the node plugins by their stable selector label and has
// no Egress type (that would isolate the pods' egress, API server
// included).
func TestPeerNetworkPolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Namespace = "openshift-cnv"
	np := cfg.PeerNetworkPolicy()
	b, err := yaml.Marshal(np.Spec)
	if err != nil {
		t.Fatal(err)
	}
	want := `ingress:
- from:
  - podSelector:
      matchLabels:
        k8s-app: hostpath-provisioner-csi
  ports:
  - port: 9447
    protocol: TCP
podSelector:
  matchLabels:
    k8s-app: hostpath-provisioner-csi
policyTypes:
- Ingress
`
	if np.Name != PeerNetworkPolicyName || np.Namespace != "openshift-cnv" || string(b) != want {
		t.Errorf("%s/%s spec:\n%s\nwant\n%s", np.Namespace, np.Name, b, want)
	}
	ds, err := cfg.CSIDaemonSet(peerSpec())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v || ds.Spec.Selector.MatchLabels[k] != v {
			t.Errorf("the policy selects %s=%s, which the node plugin's selector or pods lack", k, v)
		}
	}
}
