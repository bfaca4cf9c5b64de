package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/nodeloss"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

func nodeLossReconciler(mgr ctrl.Manager, o *options, log logr.Logger) *nodeloss.Reconciler {
	return &nodeloss.Reconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("hpp-operator"),
		Log:           log.WithName("node-loss"),
		ReleaseDelay:  o.nodeLossDelay,
		NotReadyGrace: o.nodeNotReadyGrace,
	}
}

// runNodeLoss runs the node-loss controller alone (--controllers=node-loss):
// no reconciler and no webhook, so it needs neither certificates nor a CR
// (with one, it writes status.strandedVolumes). Its own lease: it is not
// meant to run beside a full operator, which has the controller already.
func runNodeLoss(ctx context.Context, o *options, cfg render.Config, scheme *runtime.Scheme, restCfg *rest.Config, log logr.Logger) error {
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   hostpathprovisioner.CacheOptions(cfg),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddress},
		HealthProbeBindAddress:  o.healthAddress,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "hpp-node-loss.hostpathprovisioner.kubevirt.io",
		LeaderElectionNamespace: o.namespace,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := nodeLossReconciler(mgr, o, log).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting the node-loss controller alone", "version", cfg.Version, "namespace", cfg.Namespace,
		"releaseDelay", o.nodeLossDelay, "notReadyGrace", o.nodeNotReadyGrace)
	return mgr.Start(ctx)
}
