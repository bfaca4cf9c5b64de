package main

import (
	"context"
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
// image environment variables of DESIGN.md §1.
func renderConfig(o *options, getenv func(string) string) (render.Config, error) {
	cfg := render.DefaultConfig()
	cfg.Namespace = o.namespace
	cfg.KubeletDir = o.kubeletDir
	cfg.PriorityClassName = o.priorityClass
	cfg.Version = version.Version
	set := func(dst *string, env string) {
		if v := getenv(env); v != "" {
			*dst = v
		}
	}
	set(&cfg.Images.CSI, "CSI_PROVISIONER_IMAGE")
	set(&cfg.Images.Legacy, "PROVISIONER_IMAGE")
	set(&cfg.Images.Provisioner, "CSI_SIG_STORAGE_PROVISIONER_IMAGE")
	set(&cfg.Images.NodeDriverRegistrar, "NODE_DRIVER_REG_IMAGE")
	set(&cfg.Images.LivenessProbe, "LIVENESS_PROBE_IMAGE")
	set(&cfg.Images.Snapshotter, "CSI_SNAPSHOT_IMAGE")
	set(&cfg.Images.Resizer, "CSI_RESIZER_IMAGE")
	set(&cfg.Images.Mounter, "MOUNTER_IMAGE")
	set(&cfg.MonitoringNamespace, "MONITORING_NAMESPACE")
	set(&cfg.RunbookURLTemplate, "RUNBOOK_URL_TEMPLATE")
	if v := getenv("VERBOSITY"); v != "" {
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

func run(ctx context.Context, o *options, getenv func(string) string) error {
	zl, err := o.logging.Build()
	if err != nil {
		return err
	}
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	cfg, err := renderConfig(o, getenv)
	if err != nil {
		return err
	}
	tlsPolicy, err := hppwebhook.NewTLSPolicy(getenv("TLS_MIN_VERSION_OVERRIDE"), getenv("TLS_CIPHERS_OVERRIDE"))
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
		Scheme:        scheme,
		WebhookServer: hppwebhook.NewServer("", o.webhookPort, o.certDir, tlsPolicy),
		Cache:         controller.CacheOptions(cfg),
		// Metrics are plain HTTP (SecureServing off), as the Service and
		// ServiceMonitor expect.
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddress},
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
