package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/handlers"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/host"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peercert"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/remote"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/serve"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/selinux"
	"github.com/hostpath-provisioner/hpp/internal/version"
)

// Run builds the real dependencies and serves until ctx is cancelled. The
// options are validated.
func (o *options) Run(ctx context.Context) error {
	log, err := o.logging.Build()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	log.Info("starting", zap.Stringer("version", version.Get("hpp-csi")), zap.String("node", o.nodeID),
		zap.Int("pools", len(o.pools.All())), zap.Bool("controllerOnly", o.controllerOnly))

	metrics := handlers.NewMetrics()
	cfg := o.driverConfig()
	// One connection to the API server for every client that needs it,
	// made only when one does.
	api := sync.OnceValues(func() (kubeapi.Conn, error) { return kubeapi.Connect(o.kubeconfig) })
	peers, err := o.peerTransport(log, api)
	if err != nil {
		return err
	}
	if peers != nil {
		// Closed by the server's shutdown too; this covers a Run that
		// fails before it serves.
		defer func() { _ = peers.lis.Close() }()
	}
	// The pool runtime gets the real OS adapters; the handlers only ask it.
	rt, err := pools.New(cfg.Config, pools.Deps{
		Remote:  peers.remote(),
		Claims:  peers.claims(),
		Mounter: host.SyscallMounter{},
		Labeler: selinux.New(log.Named("selinux")),
		FS:      host.Filesystem{},
		Logger:  log,
		Metrics: metrics.Registry,
		Quota:   prjquota.NewLinux(),
		// Nil unless built with the tag hpp_killpoints (crash tests).
		QuotaStep: killPoint(),
	})
	if err != nil {
		return fmt.Errorf("configuring driver: %w", err)
	}
	deps := handlers.Deps{Logger: log, Metrics: metrics}
	if o.checkBindingMode {
		conn, err := api()
		if err != nil {
			return err
		}
		deps.Binding = kubeapi.NewForHost(conn.Host, conn.Client)
	}
	d, err := handlers.New(cfg, rt, deps)
	if err != nil {
		return fmt.Errorf("configuring driver: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	// With --controller-only there are no pools (and no registration:
	// node-only flags are refused).
	if !o.controllerOnly {
		// Pools are opened and recovered here, once, before the socket
		// serves; no request ever opens one.
		if err := rt.OpenPools(ctx); err != nil {
			// Not fatal: the pool's disk may be mounted later. Probe and
			// /healthz say not-ready until RetryPools opens it.
			log.Warn("some storage pools are not usable yet", zap.Error(err))
		}
		g.Go(func() error { rt.RetryPools(gctx, o.poolRetry); return nil })
		// Copies from other nodes that no CreateVolume collected, whose
		// claim is gone, are removed (pools/uncollected.go); a no-op
		// without the peer transport.
		g.Go(func() error { rt.RunUncollectedSweeper(gctx); return nil })
	}
	if peers != nil {
		peers.server.Source = &remote.Source{RT: rt, Log: log.Named("peer")}
		if peers.server.Metrics, err = peer.NewMetrics(metrics.Registry); err != nil {
			return fmt.Errorf("configuring the peer transport's metrics: %w", err)
		}
		g.Go(func() error { return peers.server.Serve(gctx, peers.lis) })
		if peers.keeper != nil {
			g.Go(func() error { peers.keeper.Run(gctx); return nil })
		}
	}
	csiLog := log.With(zap.String("driver", o.driverName), zap.String("node", o.nodeID))
	g.Go(func() error { return serve.CSI(gctx, csiLog, d.NewGRPCServer(), o.socketPath, o.shutdownGrace) })
	var reg *serve.Registrar
	if o.kubeletRegistrationPath != "" {
		reg = &serve.Registrar{
			DriverName: o.driverName, CSISocket: o.kubeletRegistrationPath, RegistryDir: o.pluginRegistryDir,
			Log: log.Named("registration"), Gauge: metrics,
		}
		g.Go(func() error { return reg.Run(gctx) })
	}
	if o.healthAddress != "" {
		g.Go(func() error {
			return serve.HTTP(gctx, log, "health", o.healthAddress, serve.HealthHandler(rt.Ready, reg), nil)
		})
	}
	if o.metricsAddress != "" {
		var tlsConfig *tls.Config
		if o.metricsTLS != nil {
			if tlsConfig, err = o.metricsTLS.Config(); err != nil {
				return err
			}
		}
		g.Go(func() error {
			return serve.HTTP(gctx, log, "metrics", o.metricsAddress, serve.MetricsHandler(metrics.Registry), tlsConfig)
		})
	}
	err = g.Wait()
	log.Info("stopped")
	return err
}

// peers is the peer transport of cross-node clones (--peer-address): the
// server, its listener, and the fetcher the pool runtime asks.
type peers struct {
	// keeper, with --peer-ca-bundle, keeps the certificate issued.
	keeper  *peercert.Keeper
	server  *peer.Server
	lis     net.Listener
	fetcher *remote.Fetcher
	// api reads claims and PVs: the claim checks, the resolver, and the
	// sweep of uncollected copies.
	api *kubeapi.Sources
}

// remote is the pool runtime's RemoteSources: nil (sources node-local)
// without --peer-address.
func (p *peers) remote() pools.RemoteSources {
	if p == nil {
		return nil
	}
	return p.fetcher
}

// claims is the pool runtime's API access for the sweep of uncollected
// copies: nil (no sweep, and no copies to sweep) without --peer-address.
func (p *peers) claims() pools.ClaimLookup {
	if p == nil {
		return nil
	}
	return p.api
}

// peerTransport loads the credentials, connects to the API and listens,
// when --peer-address is set; nil otherwise. The server's Source is set
// once the pool runtime exists.
func (o *options) peerTransport(log *zap.Logger, connect func() (kubeapi.Conn, error)) (*peers, error) {
	if o.peerAddress == "" {
		return nil, nil
	}
	conn, err := connect()
	if err != nil {
		return nil, err
	}
	api := kubeapi.NewSourcesForHost(conn.Host, conn.Client)
	var creds *peer.Credentials
	var keeper *peercert.Keeper
	if o.peerCABundle != "" {
		// The certificate is requested in the background: the driver
		// serves its node's volumes meanwhile, and peers are refused
		// with the reason until it is issued.
		csrs := kubeapi.NewCSRsForHost(conn.Host, conn.Client)
		creds = peer.PendingCredentials(o.peerCertDir)
		keeper = &peercert.Keeper{Node: o.nodeID, Dir: o.peerCertDir, BundleFile: o.peerCABundle, API: csrs, Log: log.Named("peercert")}
	} else if creds, err = peer.LoadCredentials(o.peerCertDir); err != nil {
		return nil, fmt.Errorf("--peer-cert-dir: %w", err)
	}
	lis, err := net.Listen("tcp", o.peerAddress)
	if err != nil {
		return nil, fmt.Errorf("--peer-address: %w", err)
	}
	return &peers{
		keeper: keeper,
		server: &peer.Server{Node: o.nodeID, Creds: creds, Auth: peer.NewClaimCheck(api, o.driverName), Log: log.Named("peer")},
		lis:    lis,
		api:    api,
		fetcher: &remote.Fetcher{
			Resolver: &remote.Resolver{API: api, Driver: o.driverName, Node: o.nodeID, Port: o.peerPort()},
			Client:   &peer.Client{Creds: creds},
		},
	}, nil
}
