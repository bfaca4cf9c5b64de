package main

import (
	"context"
	"crypto/tls"
	"fmt"

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

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

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

// Run starts the manager and serves until ctx is cancelled. The options
// are validated.
func (o *options) Run(ctx context.Context) error {
	zl, err := o.logging.Build()
	if err != nil {
		return err
	}
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	if img, fromOperator := o.env.mounter(); fromOperator {
		log.Info("MOUNTER_IMAGE is unset: pool mounters run OPERATOR_IMAGE, as upstream's do; that image must carry hpp-mounter", "image", img)
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg := o.render
	if o.controllers == controllersNodeLoss {
		return runNodeLoss(ctx, o, cfg, scheme, restCfg, log)
	}
	if err := discover(restCfg, &cfg, log); err != nil {
		return err
	}
	direct, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	clusterTLS, err := clusterTLSProfile(ctx, restCfg, direct, o.tlsPolicy, log)
	if err != nil {
		return err
	}
	// hpp-csi gets the profile's minimum version as upstream's driver does
	// (--metrics-tls-version); a later profile change reaches it at the
	// operator's next start, while the operator's own servers follow it
	// at once.
	cfg.MetricsTLSVersion = hppwebhook.VersionName(o.tlsPolicy.Profile().MinVersion)
	certs, err := o.webhookCerts(direct, log)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		WebhookServer:           hppwebhook.NewServer("", o.webhookPort, o.certDir, o.tlsPolicy),
		Cache:                   hostpathprovisioner.CacheOptions(cfg),
		Metrics:                 metricsOptions(o, o.tlsPolicy),
		HealthProbeBindAddress:  o.healthAddress,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "hpp-operator.hostpathprovisioner.kubevirt.io",
		LeaderElectionNamespace: o.namespace,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := o.setUp(mgr, cfg, scheme, clusterTLS, certs, log); err != nil {
		return err
	}
	log.Info("starting", "version", cfg.Version, "namespace", cfg.Namespace, "openshift", cfg.OpenShift)
	return mgr.Start(ctx)
}

// discover asks the API server which optional APIs it serves:
// prometheus-operator's (ServiceMonitor, PrometheusRule) and OpenShift's
// SecurityContextConstraints.
func discover(restCfg *rest.Config, cfg *render.Config, log logr.Logger) error {
	var err error
	if cfg.PrometheusOperator, err = hostpathprovisioner.ServesPrometheusOperator(restCfg); err != nil {
		return err
	}
	if !cfg.PrometheusOperator {
		log.Info("prometheus-operator's API is not served: no ServiceMonitor or PrometheusRule (restart the operator after installing it)")
	}
	cfg.OpenShift, err = hostpathprovisioner.ServesSCC(restCfg)
	return err
}

// webhookCerts makes the webhook's certificate before the server starts
// (it reads the files then), with --self-signed-certs; nil otherwise.
func (o *options) webhookCerts(direct client.Client, log logr.Logger) (*hppwebhook.SelfSigned, error) {
	if !o.selfSignedCerts {
		return nil, nil
	}
	certs := &hppwebhook.SelfSigned{Dir: o.certDir, Service: o.webhookService, Namespace: o.namespace,
		ConfigName: o.webhookConfigName, Client: direct, Log: log.WithName("webhook-certs")}
	if _, err := certs.Ensure(); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	return certs, nil
}

// setUp adds the reconciler, the node-loss controller, the peer
// certificates' signer (with the peer transport), the webhook, the
// cluster TLS profile watch and certificate rotation (when there are) and
// the health checks to mgr.
func (o *options) setUp(mgr ctrl.Manager, cfg render.Config, scheme *runtime.Scheme,
	clusterTLS *hppwebhook.ClusterTLSProfile, certs *hppwebhook.SelfSigned, log logr.Logger) error {
	r := &hostpathprovisioner.Reconciler{
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
	if err := addPeerSigner(mgr, cfg, log); err != nil {
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
	return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
}

// clusterTLSProfile: where OpenShift's APIServer configuration is served,
// the webhook follows its TLS profile; it is read once here, before the
// webhook serves, and watched from then on. Elsewhere: nil (Intermediate,
// under the overrides).
func clusterTLSProfile(ctx context.Context, restCfg *rest.Config, direct client.Reader, policy *hppwebhook.TLSPolicy, log logr.Logger) (*hppwebhook.ClusterTLSProfile, error) {
	served, err := hostpathprovisioner.ServesAPIServerConfig(restCfg)
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
