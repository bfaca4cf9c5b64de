package cluster

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
)

// recordingCommander records the stdin of each command instead of running
// it.
type recordingCommander struct{ stdin []string }

func (r *recordingCommander) Run(ctx context.Context, name string, args ...string) (string, error) {
	return r.RunInput(ctx, "", name, args...)
}

func (r *recordingCommander) RunInput(_ context.Context, stdin string, name string, args ...string) (string, error) {
	r.stdin = append(r.stdin, name+" "+strings.Join(args, " ")+"\n"+stdin)
	return "", nil
}

// The other tiers must see the cluster they always saw: no gateway,
// kube-apiserver on loopback, no audit log.
func TestPodNetworkIsOptIn(t *testing.T) {
	for _, tc := range []struct {
		opts        Options
		gateway     bool
		wantArgs    []string
		notWantArgs []string
	}{
		{Options{}, false, []string{"--bind-address=127.0.0.1"}, []string{"--enable-aggregator-routing=true"}},
		{Options{PodNetwork: true}, true, []string{"--bind-address=0.0.0.0", "--enable-aggregator-routing=true"}, []string{"--bind-address=127.0.0.1"}},
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
		for _, a := range append(tc.notWantArgs, "--audit-log-format=json") {
			if slices.Contains(args, a) {
				t.Errorf("PodNetwork=%v: kube-apiserver args %v have %s", tc.opts.PodNetwork, args, a)
			}
		}
	}
}

// The chain is one transaction, named so removeChains sweeps it.
func TestRouteKubernetesServiceScript(t *testing.T) {
	rec := &recordingCommander{}
	if err := routeKubernetesService(t.Context(), rec, net.IPv4(192, 0, 2, 2), "6443"); err != nil {
		t.Fatal(err)
	}
	want := `iptables-restore --noflush
*nat
:KUBE-HPP-APISERVER - [0:0]
-A KUBE-HPP-APISERVER -d 10.96.0.1/32 -p tcp --dport 443 -j DNAT --to-destination 192.0.2.2:6443
-I PREROUTING -j KUBE-HPP-APISERVER
-I OUTPUT -j KUBE-HPP-APISERVER
COMMIT
`
	if len(rec.stdin) != 1 || rec.stdin[0] != want {
		t.Fatalf("commands:\n%q\nwant one:\n%q", rec.stdin, want)
	}
}
