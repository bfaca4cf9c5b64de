package render

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// crObjects is everything the operator renders for a pools CR (OpenShift
// and prometheus-operator on, so the SCC and every monitoring object are
// in), as YAML, with the configuration the CR decides (ForCR).
func crObjects(t *testing.T, operator bool, crossNode *bool) string {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OpenShift, cfg.PrometheusOperator, cfg.PeerTransport = true, true, operator
	spec := peerSpec(hppv1.FeatureSnapshotting)
	spec.CrossNodeClones = crossNode
	cfg = cfg.ForCR(spec)
	csi, err := cfg.CSIObjects(spec)
	if err != nil {
		t.Fatal(err)
	}
	objs := append(append(cfg.SCCs(spec), csi...), cfg.MonitoringObjects()...)
	b, err := YAML("", objs...)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What the peer transport adds anywhere in the CR's objects: the flags,
// the port (container and SCC), the certificate volumes, the ClusterRole's
// certificate requests. The NetworkPolicy is never among the CR's objects
// (it is part of the operator's install, deploy/base/operator).
var peerMarks = []string{"--peer-address=:" + strconv.Itoa(PeerPort), "--peer-cert-dir=", "--peer-ca-bundle=",
	"hostPort: " + strconv.Itoa(PeerPort), "name: peer-cert", "name: " + PeerCABundleName,
	"certificatesigningrequests", "allowHostPorts: true"}

// spec.crossNodeClones: absent or true keeps the operator's peer transport;
// false renders none of it, and the objects are exactly those of the
// operator without the transport. The CR cannot turn on what the
// operator's configuration has off (nothing would sign the certificates).
func TestCrossNodeClonesFieldOfTheCR(t *testing.T) {
	without := crObjects(t, false, nil)
	for _, m := range peerMarks {
		if strings.Contains(without, m) {
			t.Fatalf("%q rendered without the peer transport: the marks of this test are wrong", m)
		}
	}
	for _, tc := range []struct {
		name     string
		operator bool
		field    *bool
		on       bool
	}{
		{"field absent", true, nil, true},
		{"crossNodeClones: true", true, ptr.To(true), true},
		{"crossNodeClones: false", true, ptr.To(false), false},
		{"crossNodeClones: true, operator without the transport", false, ptr.To(true), false},
	} {
		got := crObjects(t, tc.operator, tc.field)
		for _, m := range peerMarks {
			if strings.Contains(got, m) != tc.on {
				t.Errorf("%s: %q rendered %v, want %v", tc.name, m, !tc.on, tc.on)
			}
		}
		if strings.Contains(got, "kind: NetworkPolicy") {
			t.Errorf("%s: a NetworkPolicy among the CR's objects (it belongs to the install manifests)", tc.name)
		}
		if !tc.on && got != without {
			t.Errorf("%s: the objects differ from the operator's without the peer transport:\n%s\nwant\n%s", tc.name, got, without)
		}
	}
}
