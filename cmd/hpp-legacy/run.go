package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"
	libmetrics "sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller/metrics"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-legacy/provisioner"
	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/selinux"
	"github.com/hostpath-provisioner/hpp/internal/version"
)

// Run serves until ctx is cancelled, then lets volume operations in flight
// finish (up to --shutdown-timeout) before returning. The options are
// validated.
func (o *options) Run(ctx context.Context) error {
	log, err := o.Logging.Build()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	// The library and client-go log through klog; send it to the same zap
	// output so there is one log format. klog is process-global, and main
	// is the one place allowed to set it.
	klog.SetLogger(zapr.NewLogger(log.Named("klog")))

	prefix, headroom := o.prefix, o.headroom
	log.Info("starting", zap.Stringer("version", version.Get(component)), zap.String("node", o.NodeName),
		zap.String("pvDir", o.PVDir), zap.Bool("useNamingPrefix", prefix),
		zap.Int64("reservedBytes", headroom.Bytes), zap.Float64("reservedPercent", headroom.Percent))

	client, err := newClient(o)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, o.PVDir, log)
	if err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(client, o.ResyncPeriod)
	// Only this node's Node object: a DaemonSet on a large cluster must not
	// make every pod watch every node.
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, o.ResyncPeriod,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.NodeName).String()
		}))
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	classes := factory.Storage().V1().StorageClasses()
	nodes := nodeFactory.Core().V1().Nodes()

	counters := provisioner.NewMetrics()
	prov, err := provisioner.New(provisioner.Config{
		NodeName: o.NodeName, PVDir: o.PVDir, UseNamingPrefix: prefix, Headroom: headroom,
		Client: client, Nodes: nodes.Lister(), Classes: classes.Lister(), Volumes: store,
		Labeler: selinux.New(log.Named("selinux")), Statfs: capacity.Statfs,
		Logger: log.Named("provisioner"), Metrics: counters,
	})
	if err != nil {
		return err
	}

	libm := libmetrics.New("controller")
	registry := newRegistry(libm, counters)

	ctrlLog := zapr.NewLogger(log.Named("controller"))
	ctrl := controller.NewProvisionController(ctrlLog, client, contract.LegacyProvisionerName, prov,
		// Every node must see every claim and decide for itself.
		controller.LeaderElection(false),
		controller.ClaimsInformer(claims),
		controller.VolumesInformer(volumes),
		controller.ClassesInformer(classes.Informer()),
		// The library reads the selected node from here instead of a GET
		// per claim. It holds only this node, which is the selected one
		// whenever ShouldProvision said yes; a claim pinned here by
		// provisionOnNode while the scheduler selected another node finds
		// no node and is rescheduled, and then pinned here again.
		controller.NodesLister(nodes.Lister()),
		// Served by our own endpoint (MetricsPort stays 0), from our registry.
		controller.MetricsInstance(libm),
		controller.Threadiness(o.Workers),
		controller.ResyncPeriod(o.ResyncPeriod),
	)

	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nodeFactory.Shutdown()
	synced := []cache.InformerSynced{claims.HasSynced, volumes.HasSynced, classes.Informer().HasSynced, nodes.Informer().HasSynced}

	var srv *httpServer
	if o.HTTPAddress != "" {
		lis, err := net.Listen("tcp", o.HTTPAddress)
		if err != nil {
			return fmt.Errorf("--http-address: %w", err)
		}
		srv = serveHTTP(lis, registry, healthCheck(ctrl, synced), log.Named("http"))
		log.Info("serving metrics and health", zap.String("address", lis.Addr().String()))
	}

	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return shutdown(o, prov, srv, log)
	}
	if _, err := nodes.Lister().Get(o.NodeName); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("NODE_NAME %q: the cluster has no Node of that name", o.NodeName)
		}
		return fmt.Errorf("NODE_NAME %q: reading the Node: %w", o.NodeName, err)
	}
	ctrl.Run(klog.NewContext(ctx, ctrlLog))
	return shutdown(o, prov, srv, log)
}

// openStore opens PV_DIR and finishes the operations a previous process
// left half done, before any claim is looked at.
func openStore(ctx context.Context, dir string, log *zap.Logger) (*dirvol.Store, error) {
	store, err := dirvol.Open(dir, dirvol.Options{Logger: log.Named("dirvol")})
	if err != nil {
		return nil, fmt.Errorf("PV_DIR %s: %w", dir, err)
	}
	report, err := store.Recover(ctx)
	if err != nil {
		return nil, fmt.Errorf("PV_DIR %s: recovering interrupted operations: %w", dir, err)
	}
	log.Info("volume directory recovered", zap.Int("finishedDeletes", report.FinishedDeletes),
		zap.Int("removedStaging", report.RemovedStaging), zap.Int("removedOrphanMeta", report.RemovedOrphanMeta))
	return store, nil
}

// newRegistry serves the library's metrics and the provisioner's own from
// our endpoint.
func newRegistry(libm libmetrics.Metrics, counters *provisioner.Metrics) *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		libm.PersistentVolumeClaimProvisionTotal, libm.PersistentVolumeClaimProvisionFailedTotal,
		libm.PersistentVolumeClaimProvisionDurationSeconds, libm.PersistentVolumeDeleteTotal,
		libm.PersistentVolumeDeleteFailedTotal, libm.PersistentVolumeDeleteDurationSeconds)
	registry.MustRegister(counters.Collectors()...)
	return registry
}

func newClient(o *options) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (KUBECONFIG/--kubeconfig or in-cluster): %w", err)
	}
	cfg.QPS = o.KubeAPIQPS
	cfg.Burst = o.KubeAPIBurst
	cfg.UserAgent = component + "/" + version.Version
	return kubernetes.NewForConfig(cfg)
}

// healthCheck passes once the controller runs on synced caches.
func healthCheck(ctrl *controller.ProvisionController, synced []cache.InformerSynced) func() error {
	return func() error {
		for _, s := range synced {
			if !s() {
				return errors.New("informer caches are not synced yet")
			}
		}
		if !ctrl.HasRun() {
			return errors.New("provision controller has not started")
		}
		return nil
	}
}

// shutdown waits for volume operations in flight and stops serving.
func shutdown(o *options, prov *provisioner.Provisioner, srv *httpServer, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	log.Info("shutting down")
	err := prov.Wait(ctx)
	if srv != nil {
		srv.shutdown(ctx)
	}
	if err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
