package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	configv1 "github.com/openshift/api/config/v1"
	secv1 "github.com/openshift/api/security/v1"
	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/version"
)

// renderConfig builds the objects' configuration from the flags and the
// environment variables of DESIGN.md §1.
func renderConfig(o *options) (render.Config, error) {
	e := o.env
	cfg := render.DefaultConfig()
	cfg.Namespace = o.namespace
	cfg.KubeletDir = o.kubeletDir
	cfg.PriorityClassName = o.priorityClass
	cfg.Version = version.Version
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
	mounter, _ := e.mounter()
	set(&cfg.Images.Mounter, mounter)
	set(&cfg.MonitoringNamespace, e.monitoringNamespace)
	set(&cfg.RunbookURLTemplate, e.runbookURLTemplate)
	cfg.InstallerPartOf = e.installerPartOf
	cfg.InstallerVersion = e.installerVersion
	if v := e.verbosity; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("VERBOSITY: %q is not a non-negative integer", v)
		}
		cfg.Verbosity = n
	}
	return cfg, cfg.Validate()
}

// Scheme is every type the operator reads or writes.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := promv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := secv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := configv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, hppv1.AddToScheme(s)
}

func run(ctx context.Context, o *options) error {
	zl, err := o.logging.Build()
	if err != nil {
		return err
	}
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	cfg, err := renderConfig(o)
	if err != nil {
		return err
	}
	if img, fromOperator := o.env.mounter(); fromOperator {
		log.Info("MOUNTER_IMAGE is unset: pool mounters run OPERATOR_IMAGE, as upstream's do; that image must carry hpp-mounter", "image", img)
	}
	tlsPolicy, err := hppwebhook.NewTLSPolicy(o.env.tlsMinVersion, o.env.tlsCiphers)
	if err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if o.controllers == controllersNodeLoss {
		return runNodeLoss(ctx, o, cfg, scheme, restCfg, log)
	}
	if cfg.PrometheusOperator, err = controller.ServesPrometheusOperator(restCfg); err != nil {
		return err
	}
	if !cfg.PrometheusOperator {
		log.Info("prometheus-operator's API is not served: no ServiceMonitor or PrometheusRule (restart the operator after installing it)")
	}
	if cfg.OpenShift, err = controller.ServesSCC(restCfg); err != nil {
		return err
	}
	direct, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	clusterTLS, err := clusterTLSProfile(ctx, restCfg, direct, tlsPolicy, log)
	if err != nil {
		return err
	}
	// hpp-csi gets the profile's minimum version as upstream's driver does
	// (--metrics-tls-version); a later profile change reaches it at the
	// operator's next start, while the operator's own servers follow it
	// at once.
	cfg.MetricsTLSVersion = hppwebhook.VersionName(tlsPolicy.Profile().MinVersion)
	var certs *hppwebhook.SelfSigned
	if o.selfSignedCerts {
		certs = &hppwebhook.SelfSigned{Dir: o.certDir, Service: o.webhookService, Namespace: o.namespace,
			ConfigName: o.webhookConfigName, Client: direct, Log: log.WithName("webhook-certs")}
		// The server reads the files when it starts: make them first.
		if _, err := certs.Ensure(); err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		WebhookServer:           hppwebhook.NewServer("", o.webhookPort, o.certDir, tlsPolicy),
		Cache:                   controller.CacheOptions(cfg),
		Metrics:                 metricsOptions(o, tlsPolicy),
		HealthProbeBindAddress:  o.healthAddress,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "hpp-operator.hostpathprovisioner.kubevirt.io",
		LeaderElectionNamespace: o.namespace,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	r := &controller.Reconciler{
		Client:   mgr.GetClient(),
		Scheme:   scheme,
		Config:   cfg,
		Recorder: mgr.GetEventRecorder("hpp-operator"),
		Log:      log.WithName("reconciler"),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := nodeLossReconciler(mgr, o, log).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := hppwebhook.Register(mgr); err != nil {
		return err
	}
	if clusterTLS != nil {
		if err := clusterTLS.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if certs != nil {
		if err := mgr.Add(certs); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	log.Info("starting", "version", cfg.Version, "namespace", cfg.Namespace, "openshift", cfg.OpenShift)
	return mgr.Start(ctx)
}

// clusterTLSProfile: where OpenShift's APIServer configuration is served,
// the webhook follows its TLS profile; it is read once here, before the
// webhook serves, and watched from then on. Elsewhere: nil (Intermediate,
// under the overrides).
func clusterTLSProfile(ctx context.Context, restCfg *rest.Config, direct client.Reader, policy *hppwebhook.TLSPolicy, log logr.Logger) (*hppwebhook.ClusterTLSProfile, error) {
	served, err := controller.ServesAPIServerConfig(restCfg)
	if err != nil || !served {
		return nil, err
	}
	w := &hppwebhook.ClusterTLSProfile{Reader: direct, Policy: policy, Log: log.WithName("tls-profile")}
	if err := w.Load(ctx); err != nil {
		return nil, fmt.Errorf("read the cluster's TLS profile (APIServer %s): %w", hppwebhook.ClusterAPIServerName, err)
	}
	return w, nil
}

// metricsOptions: /metrics over TLS on upstream's port 8443 under the
// webhook's policy (the cluster's TLS profile and the overrides, followed
// at every handshake), with a self-signed certificate unless
// --metrics-cert-dir names one. No authentication, as upstream's: the
// ServiceMonitor scrapes with insecureSkipVerify and no token.
func metricsOptions(o *options, policy *hppwebhook.TLSPolicy) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddress, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		m.CertDir = o.metricsCertDir
		m.TLSOpts = []func(*tls.Config){policy.Apply}
	}
	return m
}
