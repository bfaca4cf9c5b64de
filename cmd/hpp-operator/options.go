package main

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/nodeloss"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/logging"
	"github.com/hostpath-provisioner/hpp/internal/version"
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
	// controllers: "all", or "node-loss" for the node-loss controller
	// alone (no reconciler, no webhook), e.g. beside a csi-only install.
	controllers       string
	nodeLossDelay     time.Duration
	nodeNotReadyGrace time.Duration

	flags *pflag.FlagSet // what was given on the command line (Validate asks)
	env   environment    // set before Validate

	// filled by Validate
	render    render.Config
	tlsPolicy *hppwebhook.TLSPolicy
}

// The values of --controllers.
const (
	controllersAll      = "all"
	controllersNodeLoss = "node-loss"
)

func (o *options) addFlags(fs *pflag.FlagSet) {
	o.flags = fs
	o.logging.AddFlags(fs)
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
	fs.DurationVar(&o.nodeLossDelay, "node-loss-release-delay", 10*time.Minute, "how long a deleted node's opted-in claims wait before hpp releases them, for \""+contract.AnnReleaseAfterNodeLoss+": true\"")
	fs.DurationVar(&o.nodeNotReadyGrace, "node-not-ready-grace", 5*time.Minute, "how long a node may be NotReady before its volumes are reported as stranded")
	fs.StringVar(&o.webhookConfigName, "webhook-configuration", "hostpathprovisioner.kubevirt.io", "ValidatingWebhookConfiguration whose CA bundle the operator patches")
}

// Validate names every problem with the flags and the environment in one
// error (each by its flag or variable), and fills what Run uses: the
// namespace from the environment when the flag is not given, the objects'
// configuration and the TLS policy.
func (o *options) Validate() error {
	errs := o.logging.Validate()
	if err := o.completeNamespace(o.flags != nil && o.flags.Changed("namespace")); err != nil {
		errs = append(errs, err)
	}
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace: required (env OPERATOR_NAMESPACE or WATCH_NAMESPACE; the namespace the operator and its DaemonSets run in)"))
	}
	if !path.IsAbs(o.kubeletDir) || path.Clean(o.kubeletDir) != o.kubeletDir {
		errs = append(errs, fmt.Errorf("--kubelet-dir: %q must be a clean absolute path", o.kubeletDir))
	}
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port: %d is not a TCP port (1-65535)", o.webhookPort))
	}
	if o.controllers != controllersAll && o.controllers != controllersNodeLoss {
		errs = append(errs, fmt.Errorf("--controllers: %q is not %q or %q", o.controllers, controllersAll, controllersNodeLoss))
	}
	if o.nodeLossDelay < nodeloss.MinReleaseDelay {
		errs = append(errs, fmt.Errorf("--node-loss-release-delay: %s is shorter than %s", o.nodeLossDelay, nodeloss.MinReleaseDelay))
	}
	if o.nodeNotReadyGrace <= 0 {
		errs = append(errs, fmt.Errorf("--node-not-ready-grace: %s must be positive", o.nodeNotReadyGrace))
	}
	if o.metricsCertDir != "" && !o.metricsSecure {
		errs = append(errs, errors.New("--metrics-cert-dir: only with --metrics-secure (plain HTTP has no certificate)"))
	}
	var err error
	if o.render, err = renderConfig(o); err != nil {
		errs = append(errs, err)
	}
	if o.tlsPolicy, err = hppwebhook.NewTLSPolicy(o.env.tlsMinVersion, o.env.tlsCiphers); err != nil {
		errs = append(errs, err)
	}
	return cli.Usage(errs...)
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

// renderConfig builds the objects' configuration from the flags and the
// environment variables of the compatibility contract (docs/design.md),
// naming every bad variable; the flags it takes are checked by Validate.
func renderConfig(o *options) (render.Config, error) {
	e := o.env
	cfg := render.DefaultConfig()
	cfg.Namespace = o.namespace
	cfg.KubeletDir = o.kubeletDir
	cfg.PriorityClassName = o.priorityClass
	cfg.Version = version.Version
	// The operator runs the peer certificates' signer (run.go), so its
	// node plugins take part in cross-node clones.
	cfg.PeerTransport = true
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Images.CSI, e.csiImage)
	set(&cfg.Images.Legacy, e.legacyImage)
	set(&cfg.Images.Provisioner, e.provisionerImage)
	set(&cfg.Images.NodeDriverRegistrar, e.registrarImage)
	set(&cfg.Images.LivenessProbe, e.livenessImage)
	set(&cfg.Images.Snapshotter, e.snapshotImage)
	set(&cfg.Images.Resizer, e.resizerImage)
	mounter, _ := e.mounter()
	set(&cfg.Images.Mounter, mounter)
	set(&cfg.MonitoringNamespace, e.monitoringNamespace)
	set(&cfg.RunbookURLTemplate, e.runbookURLTemplate)
	cfg.InstallerPartOf = e.installerPartOf
	cfg.InstallerVersion = e.installerVersion
	var errs []error
	if v := e.verbosity; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("VERBOSITY: %q is not a non-negative integer", v))
		} else {
			cfg.Verbosity = n
		}
	}
	return cfg, errors.Join(append(errs, cfg.ValidateEnvironment())...)
}
