package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// kubernetesServiceIP is the kubernetes Service's ClusterIP: the first
// address of serviceCIDR, which kube-apiserver allocates to it.
const kubernetesServiceIP = "10.96.0.1"

// kubeProxyUser is the identity kube-proxy's client certificate carries:
// the default ClusterRoleBinding system:node-proxier grants it what
// kube-proxy reads (Services, EndpointSlices, Nodes) and nothing more.
const kubeProxyUser = "system:kube-proxy"

// kubeProxyArgs are kube-proxy's flags. It runs on this machine, not in
// the node's namespaces: the node shares the host's network namespace (see
// nodens_linux.go), so its rules serve pods on the bridge (PREROUTING) and
// kube-apiserver calling a webhook's ClusterIP (OUTPUT) alike. Every flag
// that would change a host sysctl kube-proxy does not restore on --cleanup
// is turned off, so Stop leaves the machine as it found it.
func (c *Cluster) kubeProxyArgs(healthzPort, metricsPort int) []string {
	return []string{
		"--kubeconfig=" + c.pki.kubeconfigs["kube-proxy"],
		"--proxy-mode=iptables",
		"--hostname-override=" + c.opts.NodeName,
		"--bind-address=" + c.nodeIP.String(),
		// Traffic to a Service from outside the pod CIDR (kube-apiserver
		// on this machine) is masqueraded, so the pod's reply comes back
		// through the rules that undo the DNAT.
		"--cluster-cidr=" + c.opts.PodCIDR,
		"--healthz-bind-address=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(healthzPort)),
		"--metrics-bind-address=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)),
		// nf_conntrack_max, and the TCP established/close-wait timeouts.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		// net.ipv4.conf.all.route_localnet: NodePorts on 127.0.0.1 are not
		// needed here; on the node IP only, not on every address of this
		// machine.
		"--iptables-localhost-nodeports=false",
		"--nodeport-addresses=primary",
		"--v=1",
	}
}

// startKubeProxy runs kube-proxy and waits until its rules route the
// kubernetes Service: from then on pods with in-cluster configuration
// reach kube-apiserver, and Services reach their pods.
func (c *Cluster) startKubeProxy(ctx context.Context) error {
	healthz, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "configure kube-proxy", Err: err}
	}
	metrics, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "configure kube-proxy", Err: err}
	}
	proc, err := c.run(ProcessSpec{
		Name: "kube-proxy", Path: c.opts.Binaries.KubeProxy,
		Args: c.kubeProxyArgs(healthz, metrics),
	})
	if err != nil {
		return &StepError{Step: "start kube-proxy", Err: err}
	}
	c.opts.Logf("kube-proxy starting (iptables mode)")
	if err := poll(ctx, startTimeout, 200*time.Millisecond, "kube-proxy's rule for the kubernetes Service", func(ctx context.Context) (bool, error) {
		if !proc.Running() {
			return false, fmt.Errorf("kube-proxy exited: %w", proc.ExitError())
		}
		save, err := c.cmd.Run(ctx, "iptables-save", "-t", "nat")
		if err != nil {
			return false, err
		}
		return routesKubernetesService(save), nil
	}); err != nil {
		return c.stepError("wait for kube-proxy", "kube-proxy", err)
	}
	return nil
}

// routesKubernetesService tells whether an iptables-save of the nat table
// holds kube-proxy's rule for the kubernetes Service's ClusterIP.
func routesKubernetesService(natSave string) bool {
	for _, line := range strings.Split(natSave, "\n") {
		if strings.HasPrefix(line, "-A KUBE-SERVICES ") && strings.Contains(line, " -d "+kubernetesServiceIP+"/32 ") {
			return true
		}
	}
	return false
}

// cleanupKubeProxy runs `kube-proxy --cleanup`, which removes kube-proxy's
// own rules in every mode it knows; removeChains then sweeps whatever
// KUBE- chain is left (kubelet's, or a mode --cleanup could not reach).
func (c *Cluster) cleanupKubeProxy(ctx context.Context) error {
	if _, err := c.cmd.Run(ctx, c.opts.Binaries.KubeProxy, "--cleanup"); err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %w", err)
	}
	return nil
}
