package cluster

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
)

// The other tiers must see the cluster they always saw: no gateway,
// kube-apiserver on loopback, no audit log.
func TestPodNetworkIsOptIn(t *testing.T) {
	for _, tc := range []struct {
		opts        Options
		gateway     bool
		wantArgs    []string
		notWantArgs []string
	}{
		{Options{}, false, []string{"--bind-address=127.0.0.1"}, nil},
		{Options{PodNetwork: true}, true, []string{"--bind-address=0.0.0.0"}, []string{"--bind-address=127.0.0.1"}},
	} {
		c := &Cluster{opts: tc.opts.withDefaults(), Dir: t.TempDir()}
		data, err := c.cniConfig()
		if err != nil {
			t.Fatal(err)
		}
		var cni struct {
			Plugins []struct {
				IsGateway        bool `json:"isGateway"`
				IsDefaultGateway bool `json:"isDefaultGateway"`
				IPMasq           bool `json:"ipMasq"`
			} `json:"plugins"`
		}
		if err := json.Unmarshal(data, &cni); err != nil {
			t.Fatal(err)
		}
		if p := cni.Plugins[0]; p.IsGateway != tc.gateway || p.IsDefaultGateway != tc.gateway || p.IPMasq {
			t.Errorf("PodNetwork=%v: CNI isGateway %v isDefaultGateway %v ipMasq %v, want %v %v false", tc.opts.PodNetwork, p.IsGateway, p.IsDefaultGateway, p.IPMasq, tc.gateway, tc.gateway)
		}
		args, err := c.apiserverExtraArgs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range tc.wantArgs {
			if !slices.Contains(args, a) {
				t.Errorf("PodNetwork=%v: kube-apiserver args %v lack %s", tc.opts.PodNetwork, args, a)
			}
		}
		// Webhooks are called through their Service (kube-proxy), never
		// at their endpoints.
		for _, a := range append(tc.notWantArgs, "--audit-log-format=json", "--enable-aggregator-routing=true") {
			if slices.Contains(args, a) {
				t.Errorf("PodNetwork=%v: kube-apiserver args %v have %s", tc.opts.PodNetwork, args, a)
			}
		}
	}
}

// kube-proxy runs in iptables mode with the harness's own kubeconfig and
// ports, and with every flag that would change a host sysctl it does not
// restore turned off.
func TestKubeProxyArgs(t *testing.T) {
	c := &Cluster{
		opts:   Options{PodNetwork: true}.withDefaults(),
		nodeIP: net.IPv4(192, 0, 2, 2),
		pki:    &pki{kubeconfigs: map[string]string{"kube-proxy": "/c/pki/kube-proxy.kubeconfig"}},
	}
	got := c.kubeProxyArgs(30001, 30002)
	for _, want := range []string{
		"--kubeconfig=/c/pki/kube-proxy.kubeconfig",
		"--proxy-mode=iptables",
		"--hostname-override=hpp-node",
		"--bind-address=192.0.2.2",
		"--cluster-cidr=10.244.0.0/22",
		"--healthz-bind-address=127.0.0.1:30001",
		"--metrics-bind-address=127.0.0.1:30002",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		"--nodeport-addresses=primary",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("kube-proxy args %v lack %s", got, want)
		}
	}
}

// PodNetwork cannot start without kube-proxy, and says which field and
// what builds it; the other tiers do not need it.
func TestPodNetworkNeedsKubeProxy(t *testing.T) {
	bins := Binaries{KubeProxy: "/nonexistent/kube-proxy"}
	if err := (Options{Binaries: bins, PodNetwork: true}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "options.PodNetwork needs kube-proxy: binaries.KubeProxy /nonexistent/kube-proxy: missing (run `make cluster-binaries`)") {
		t.Errorf("Validate with PodNetwork and no kube-proxy: %v", err)
	}
	if err := (Options{Binaries: bins}).Validate(); err != nil && strings.Contains(err.Error(), "KubeProxy") {
		t.Errorf("Validate without PodNetwork asks for kube-proxy: %v", err)
	}
}

// The readiness check finds kube-proxy's rule for the kubernetes Service
// in iptables-save output, and nothing else.
func TestRoutesKubernetesService(t *testing.T) {
	const ready = `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y
COMMIT
`
	const notYet = `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
COMMIT
`
	if !routesKubernetesService(ready) {
		t.Error("rule for 10.96.0.1 not found")
	}
	if routesKubernetesService(notYet) {
		t.Error("found a rule for 10.96.0.1 where there is none")
	}
}
