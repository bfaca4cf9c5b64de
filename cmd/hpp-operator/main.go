// Command hpp-operator installs and runs hpp from one HostPathProvisioner
// resource: a controller-runtime manager with the reconciler (package
// controller) and the validating webhook (package webhook).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller"
	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/logging"
	"github.com/hostpath-provisioner/hpp/internal/signals"
)

type options struct {
	logging           logging.Options
	metricsAddress    string
	healthAddress     string
	webhookPort       int
	leaderElect       bool
	namespace         string
	kubeletDir        string
	priorityClass     string
	certDir           string
	selfSignedCerts   bool
	webhookService    string
	webhookConfigName string
	// controllers: "all", or "node-loss" for the node-loss controller
	// alone (no reconciler, no webhook), e.g. beside a csi-only install.
	controllers       string
	nodeLossDelay     time.Duration
	nodeNotReadyGrace time.Duration
}

// The values of --controllers.
const (
	controllersAll      = "all"
	controllersNodeLoss = "node-loss"
)

func (o *options) validate() error {
	errs := o.logging.Validate()
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port: %d is not a TCP port (1-65535)", o.webhookPort))
	}
	if o.controllers != controllersAll && o.controllers != controllersNodeLoss {
		errs = append(errs, fmt.Errorf("--controllers: %q is not %q or %q", o.controllers, controllersAll, controllersNodeLoss))
	}
	if o.nodeLossDelay < controller.MinReleaseDelay {
		errs = append(errs, fmt.Errorf("--node-loss-release-delay: %s is shorter than %s", o.nodeLossDelay, controller.MinReleaseDelay))
	}
	if o.nodeNotReadyGrace <= 0 {
		errs = append(errs, fmt.Errorf("--node-not-ready-grace: %s must be positive", o.nodeNotReadyGrace))
	}
	if o.namespace == "" {
		errs = append(errs, fmt.Errorf("--namespace: required (env OPERATOR_NAMESPACE; the namespace the operator and its DaemonSets run in)"))
	}
	return cli.Usage(errs...)
}

func main() {
	var o options
	cmd := cli.NewRoot("hpp-operator", "installs and runs hpp from one HostPathProvisioner resource")
	o.logging.AddFlags(cmd.Flags())
	o.addFlags(cmd)
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		if err := cli.EnvDefault(c.Flags(), "namespace", "OPERATOR_NAMESPACE"); err != nil {
			return cli.Usage(err)
		}
		if err := o.validate(); err != nil {
			return err
		}
		ctx, cancel := signals.Context(context.Background())
		defer cancel()
		return run(ctx, &o, os.Getenv)
	}
	os.Exit(cli.Main(cmd, os.Args[1:], os.Stderr))
}

func (o *options) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.metricsAddress, "metrics-address", ":8080", "address for Prometheus metrics (empty: off)")
	fs.StringVar(&o.healthAddress, "health-address", ":8081", "address for /healthz and /readyz")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the validating webhook")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader, so only one replica reconciles")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the operator and its DaemonSets (env OPERATOR_NAMESPACE)")
	fs.StringVar(&o.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "kubelet's root directory on the nodes")
	fs.StringVar(&o.priorityClass, "priority-class", "", "PriorityClass of the node pods (must exist; empty: none)")
	fs.StringVar(&o.certDir, "cert-dir", "/tmp/hpp-operator/serving-certs", "directory of the webhook's tls.crt and tls.key")
	fs.BoolVar(&o.selfSignedCerts, "self-signed-certs", true, "make and rotate the webhook's serving certificate and patch the CA bundle (false: cert-manager or another tool provides them in --cert-dir)")
	fs.StringVar(&o.webhookService, "webhook-service", "hostpath-provisioner-operator-webhook", "Service in front of the webhook (certificate names)")
	fs.StringVar(&o.controllers, "controllers", controllersAll, "what to run: \"all\", or \"node-loss\" (only the node-loss controller: no reconciler, no webhook)")
	fs.DurationVar(&o.nodeLossDelay, "node-loss-release-delay", 10*time.Minute, "how long a deleted node's opted-in claims wait before hpp releases them, for \"hostpath.csi/release-after-node-loss: true\"")
	fs.DurationVar(&o.nodeNotReadyGrace, "node-not-ready-grace", 5*time.Minute, "how long a node may be NotReady before its volumes are reported as stranded")
	fs.StringVar(&o.webhookConfigName, "webhook-configuration", "hostpathprovisioner.kubevirt.io", "ValidatingWebhookConfiguration whose CA bundle the operator patches")
}
