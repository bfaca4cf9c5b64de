package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// kubernetesServiceIP is the kubernetes Service's ClusterIP: the first
// address of serviceCIDR, which kube-apiserver allocates to it.
const kubernetesServiceIP = "10.96.0.1"

// apiserverChain is the nat chain that stands in for kube-proxy's rule for
// the kubernetes Service. Its KUBE- prefix puts it under removeChains and
// sweepStale with kubelet's chains.
const apiserverChain = "KUBE-HPP-APISERVER"

// auditPolicy logs every request's metadata (user, verb, resource,
// response code) once, when its response is complete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditLogPath is kube-apiserver's audit log (JSON lines) when
// Options.AuditLog is set.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.logDir(), "audit.jsonl") }

// apiserverExtraArgs are kube-apiserver's flags for the opt-in Options.
func (c *Cluster) apiserverExtraArgs() ([]string, error) {
	var args []string
	if c.opts.PodNetwork {
		// Pods reach it at the node IP (the kubernetes Service's endpoint,
		// through apiserverChain), and without kube-proxy a webhook's
		// ClusterIP leads nowhere from this machine: call its endpoints.
		args = append(args, "--bind-address=0.0.0.0", "--enable-aggregator-routing=true")
	} else {
		args = append(args, "--bind-address=127.0.0.1")
	}
	if c.opts.AuditLog {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+c.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-mode=blocking")
	}
	return args, nil
}

// routeKubernetesService adds the one rule of kube-proxy that pods with
// in-cluster configuration need: the kubernetes Service's ClusterIP:443
// goes to kube-apiserver on the node IP, from pods (PREROUTING) and from
// this machine (OUTPUT). One iptables-restore transaction, so a failure
// leaves no half chain.
func routeKubernetesService(ctx context.Context, cmd Commander, nodeIP net.IP, port string) error {
	script := fmt.Sprintf(`*nat
:%[1]s - [0:0]
-A %[1]s -d %[2]s/32 -p tcp --dport 443 -j DNAT --to-destination %[3]s
-I PREROUTING -j %[1]s
-I OUTPUT -j %[1]s
COMMIT
`, apiserverChain, kubernetesServiceIP, net.JoinHostPort(nodeIP.String(), port))
	if _, err := cmd.RunInput(ctx, script, "iptables-restore", "--noflush"); err != nil {
		return fmt.Errorf("iptables-restore: %w", err)
	}
	return nil
}
