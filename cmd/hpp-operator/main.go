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
	metricsSecure     bool
	metricsCertDir    string
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
	env               environment
	// controllers: "all", or "node-loss" for the node-loss controller
	// alone (no reconciler, no webhook), e.g. beside a csi-only install.
	controllers       string
	nodeLossDelay     time.Duration
	nodeNotReadyGrace time.Duration
}

// environment is what the operator takes from its environment: upstream's
// variables (DESIGN.md §1 "operator env"), read here and nowhere else.
type environment struct {
	// Images of what the operator deploys.
	csiImage, legacyImage, provisionerImage, registrarImage, livenessImage, snapshotImage string
	// mounterImage (MOUNTER_IMAGE) and operatorImage (OPERATOR_IMAGE):
	// upstream runs its pool mounters from OPERATOR_IMAGE; hpp's mounter is
	// its own image, so MOUNTER_IMAGE wins and OPERATOR_IMAGE is the
	// mounter only when MOUNTER_IMAGE is unset (see mounter()).
	mounterImage, operatorImage string
	// healthMonitorImage (CSI_HEALTH_MONITOR_IMAGE) is accepted and unused:
	// hpp-csi reports volume health itself (CSI 1.13 health RPCs).
	healthMonitorImage string
	verbosity          string
	// operatorNamespace (OPERATOR_NAMESPACE, hpp's) and watchNamespace
	// (WATCH_NAMESPACE, upstream's: its own namespace, from the downward
	// API) both name the namespace the operator installs into.
	operatorNamespace, watchNamespace       string
	installerPartOf, installerVersion       string
	monitoringNamespace, runbookURLTemplate string
	tlsMinVersion, tlsCiphers               string
}

// readEnvironment takes every variable the operator honours.
func readEnvironment(getenv func(string) string) environment {
	return environment{
		csiImage:            getenv("CSI_PROVISIONER_IMAGE"),
		legacyImage:         getenv("PROVISIONER_IMAGE"),
		provisionerImage:    getenv("CSI_SIG_STORAGE_PROVISIONER_IMAGE"),
		registrarImage:      getenv("NODE_DRIVER_REG_IMAGE"),
		livenessImage:       getenv("LIVENESS_PROBE_IMAGE"),
		snapshotImage:       getenv("CSI_SNAPSHOT_IMAGE"),
		mounterImage:        getenv("MOUNTER_IMAGE"),
		operatorImage:       getenv("OPERATOR_IMAGE"),
		healthMonitorImage:  getenv("CSI_HEALTH_MONITOR_IMAGE"),
		verbosity:           getenv("VERBOSITY"),
		operatorNamespace:   getenv("OPERATOR_NAMESPACE"),
		watchNamespace:      getenv("WATCH_NAMESPACE"),
		installerPartOf:     getenv("INSTALLER_PART_OF_LABEL"),
		installerVersion:    getenv("INSTALLER_VERSION_LABEL"),
		monitoringNamespace: getenv("MONITORING_NAMESPACE"),
		runbookURLTemplate:  getenv("RUNBOOK_URL_TEMPLATE"),
		tlsMinVersion:       getenv("TLS_MIN_VERSION_OVERRIDE"),
		tlsCiphers:          getenv("TLS_CIPHERS_OVERRIDE"),
	}
}

// mounter is the pool mounters' image: MOUNTER_IMAGE, else OPERATOR_IMAGE
// (upstream's rule: its mounter binary ships in the operator image), else
// empty (render's default). The second is right only for an operator image
// that carries the mounter; hpp's manifests set MOUNTER_IMAGE.
func (e environment) mounter() (image string, fromOperatorImage bool) {
	if e.mounterImage != "" {
		return e.mounterImage, false
	}
	return e.operatorImage, e.operatorImage != ""
}

// completeNamespace fills --namespace when the command line left it empty:
// OPERATOR_NAMESPACE, else WATCH_NAMESPACE. Upstream's operator runs where
// WATCH_NAMESPACE says (its manifests set it to the pod's namespace);
// upstream's "all namespaces" (empty) has no meaning for an operator that
// installs into one namespace.
func (o *options) completeNamespace(flagSet bool) error {
	e := o.env
	if e.operatorNamespace != "" && e.watchNamespace != "" && e.operatorNamespace != e.watchNamespace {
		return fmt.Errorf("OPERATOR_NAMESPACE %q and WATCH_NAMESPACE %q name different namespaces: set one (hpp runs in one namespace)",
			e.operatorNamespace, e.watchNamespace)
	}
	if flagSet {
		return nil
	}
	switch {
	case e.operatorNamespace != "":
		o.namespace = e.operatorNamespace
	case e.watchNamespace != "":
		o.namespace = e.watchNamespace
	}
	return nil
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
		errs = append(errs, fmt.Errorf("--namespace: required (env OPERATOR_NAMESPACE or WATCH_NAMESPACE; the namespace the operator and its DaemonSets run in)"))
	}
	if o.metricsCertDir != "" && !o.metricsSecure {
		errs = append(errs, fmt.Errorf("--metrics-cert-dir: only with --metrics-secure (plain HTTP has no certificate)"))
	}
	return cli.Usage(errs...)
}

func main() {
	var o options
	cmd := cli.NewRoot("hpp-operator", "installs and runs hpp from one HostPathProvisioner resource")
	o.logging.AddFlags(cmd.Flags())
	o.addFlags(cmd)
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		o.env = readEnvironment(os.Getenv)
		if err := o.completeNamespace(c.Flags().Changed("namespace")); err != nil {
			return cli.Usage(err)
		}
		if err := o.validate(); err != nil {
			return err
		}
		ctx, cancel := signals.Context(context.Background())
		defer cancel()
		return run(ctx, &o)
	}
	os.Exit(cli.Main(cmd, os.Args[1:], os.Stderr))
}

func (o *options) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.metricsAddress, "metrics-address", ":8443", "address for Prometheus /metrics (empty: off); upstream's port, which its NetworkPolicy opens")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve /metrics over TLS, under the webhook's TLS policy (false: plain HTTP)")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory of the metrics server's tls.crt and tls.key (empty: a self-signed certificate made at start, as upstream's)")
	fs.StringVar(&o.healthAddress, "health-address", ":8081", "address for /healthz and /readyz")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the validating webhook")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader, so only one replica reconciles")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the operator and its DaemonSets (env OPERATOR_NAMESPACE, else upstream's WATCH_NAMESPACE)")
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
