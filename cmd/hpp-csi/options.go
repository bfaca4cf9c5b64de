package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/handlers"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/serve"
	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/logging"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

type options struct {
	logging       logging.Options
	verbosity     int
	vendorVersion string

	endpoint         string
	driverName       string
	nodeID           string
	datadir          string
	maxVolumes       int64
	reservationAware bool
	statsCacheTTL    time.Duration
	statsTimeout     time.Duration
	shutdownGrace    time.Duration
	poolRetry        time.Duration

	kubeletRegistrationPath string
	pluginRegistryDir       string
	healthAddress           string
	metricsAddress          string
	metricsCertFile         string
	metricsKeyFile          string
	metricsTLSVersion       string
	checkBindingMode        bool
	kubeconfig              string
	controllerOnly          bool
	peerAddress             string
	peerCertDir             string
	peerCABundle            string
	copyStallTimeout        time.Duration

	flags *pflag.FlagSet // what was given on the command line (Validate asks)

	// filled by Validate
	socketPath string
	pools      *pool.Set
	metricsTLS *serve.MetricsTLS // nil: plain HTTP
}

// defaultTLSMetricsAddress is where the KubeVirt plugin serves its TLS
// metrics; used when TLS is asked for without --metrics-address.
const defaultTLSMetricsAddress = ":8443"

// envFlags fill the flags the command line did not give, as in the KubeVirt
// plugin's DaemonSet.
var envFlags = []cli.EnvVar{
	{Flag: "nodeid", Env: "NODE_NAME"},
	{Flag: "datadir", Env: "PV_DIR"},
	{Flag: "endpoint", Env: "CSI_ENDPOINT"},
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	o.flags = fs
	o.logging.AddFlags(fs)
	o.addCompatFlags(fs)
	fs.StringVar(&o.endpoint, "endpoint", "unix:///csi/csi.sock", "CSI socket: unix:///path or /path (env CSI_ENDPOINT)")
	fs.StringVar(&o.driverName, "drivername", contract.DriverName, "CSI driver name")
	fs.StringVar(&o.nodeID, "nodeid", "", "this node's name, as in its Node object (required; env NODE_NAME)")
	fs.StringVar(&o.datadir, "datadir", "", `storage pools as JSON: [{"name":"legacy","path":"/var/hpvolumes/csi"}] (required; env PV_DIR). `+
		`"path" is the directory that holds the volumes (relative: from the working directory); optional per pool: "shared" (true: storage every node mounts, volumes get no node topology), `+
		`"snapshotPath" and "snapshotProvider" ("reflink": snapshots of the pool's volumes, in snapshotPath), "reservedBytes", "reservedPercent", `+
		`"enforceSize" (true: each volume gets a project quota equal to its size; XFS or ext4 mounted with prjquota), "projectIDs" ({"first":N,"last":M}, default 4000000-4999999), "cacheBytes" (the most the pool's cache of sources fetched from other nodes may hold; default 10% of the pool's filesystem)`)
	fs.Int64Var(&o.maxVolumes, "max-volumes", 0, "volumes this node may hold, reported to the scheduler (0: no limit)")
	fs.BoolVar(&o.reservationAware, "reservation-aware-capacity", false, "offered capacity also subtracts what live volumes requested but have not written yet")
	fs.DurationVar(&o.statsCacheTTL, "stats-cache-ttl", time.Minute, "how long a volume's measured usage is reused by NodeGetVolumeStats")
	fs.DurationVar(&o.statsTimeout, "stats-timeout", 30*time.Second, "time bound of one volume usage walk")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long in-flight calls may take to finish")
	fs.DurationVar(&o.poolRetry, "pool-retry-interval", 10*time.Second, "how often a pool that could not be opened at start (its disk not mounted yet) is tried again")
	fs.StringVar(&o.kubeletRegistrationPath, "kubelet-registration-path", "", "register with kubelet: the CSI socket path as kubelet sees it, e.g. /var/lib/kubelet/plugins/"+contract.DriverName+"/csi.sock (empty: a node-driver-registrar sidecar does it)")
	fs.StringVar(&o.pluginRegistryDir, "plugin-registration-dir", "/var/lib/kubelet/plugins_registry", "kubelet's plugin registry directory, where the registration socket goes")
	fs.StringVar(&o.healthAddress, "health-address", "", "serve /healthz here, e.g. :9808 (empty: off)")
	fs.StringVar(&o.metricsAddress, "metrics-address", "", "serve Prometheus /metrics here, e.g. :8080 (empty: off, or :8443 when a --metrics-* TLS flag is given); plain HTTP unless a TLS flag is given")
	fs.StringVar(&o.metricsCertFile, "metrics-cert-file", "", "serve /metrics over TLS with this certificate (with --metrics-key-file; re-read when it changes); any --metrics-* TLS flag alone turns TLS on with a self-signed certificate for localhost, 127.0.0.1 and $POD_IP")
	fs.StringVar(&o.metricsKeyFile, "metrics-key-file", "", "private key of --metrics-cert-file")
	fs.StringVar(&o.metricsTLSVersion, "metrics-tls-version", "VersionTLS13", "minimum TLS version of /metrics when served over TLS: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13")
	fs.BoolVar(&o.checkBindingMode, "check-binding-mode", false, "refuse claims of Immediate StorageClasses with a message saying so (reads claims and StorageClasses from the API; needs csi-provisioner's --extra-create-metadata)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for --check-binding-mode and --peer-address (empty: in-cluster)")
	fs.StringVar(&o.peerAddress, "peer-address", "", "cross-node clones: listen here (host:port, e.g. :9443) for the other nodes' hpp-csi, and fetch sources held by other nodes from the same port of their Node address "+
		"(mutual TLS with --peer-cert-dir; reads claims, PVs, VolumeSnapshots, VolumeSnapshotContents and Nodes from the API; needs csi-provisioner's --extra-create-metadata). Empty: off, a clone's source must be on the clone's node")
	fs.StringVar(&o.peerCertDir, "peer-cert-dir", "", "directory with this node's peer certificate as a TLS Secret mounts it (tls.crt, tls.key, ca.crt; re-read when they change); required with --peer-address")
	fs.StringVar(&o.peerCABundle, "peer-ca-bundle", "", "the peer CA bundle hpp-operator publishes (its ConfigMap "+contract.PeerCABundle+", mounted): with it hpp-csi requests its own certificate into --peer-cert-dir "+
		"(a CertificateSigningRequest of the signer "+contract.PeerSignerName+", which hpp-operator approves for the pod's own node), renews it and copies the bundle as ca.crt. Empty: the certificate files are provided (a Secret, cert-manager)")
	fs.DurationVar(&o.copyStallTimeout, "copy-stall-timeout", pools.DefaultCopyStall, "with --peer-address: a copy from another node that receives nothing for this long is given up "+
		"(Unavailable; csi-provisioner's retry starts it again). hpp-csi cannot tell a silent network cut from a slow peer: too short gives up slow links, too long keeps a claim Pending on a dead one")
	fs.BoolVar(&o.controllerOnly, "controller-only", false, "serve only Identity and ControllerExpandVolume, for csi-resizer (one Deployment per cluster): "+
		"no pools are opened, an expansion is passed to the node that holds the volume (NodeExpansionRequired); --nodeid and --datadir are not needed, node-only flags are refused")
}

// nodeOnlyFlags do nothing with --controller-only; giving one there is a
// mistake worth an error rather than silence.
var nodeOnlyFlags = []string{"datadir", "max-volumes", "reservation-aware-capacity", "stats-cache-ttl", "stats-timeout",
	"pool-retry-interval", "kubelet-registration-path", "plugin-registration-dir", "check-binding-mode", "kubeconfig",
	"peer-address", "peer-cert-dir", "peer-ca-bundle", "copy-stall-timeout"}

// Validate checks everything, naming every problem in one error, and fills
// the fields Run uses (socket path, pools, metrics TLS).
func (o *options) Validate() error {
	var errs []error
	fs := o.flags
	if err := o.applyVerbosity(fs); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.logging.Validate()...)
	if err := o.completeMetricsTLS(fs); err != nil {
		errs = append(errs, err)
	}
	var err error
	if o.socketPath, err = serve.ParseEndpoint(o.endpoint); err != nil {
		errs = append(errs, err)
	}
	if o.controllerOnly {
		for _, name := range nodeOnlyFlags {
			if fs.Changed(name) {
				errs = append(errs, fmt.Errorf("--%s: not used with --controller-only (it serves expansion only, on no node)", name))
			}
		}
	} else if o.datadir == "" {
		errs = append(errs, errors.New("--datadir: required (JSON list of pools; env PV_DIR)"))
	} else if o.pools, err = parsePools(o.datadir); err != nil {
		errs = append(errs, fmt.Errorf("--datadir: %w", err))
	}
	if o.kubeletRegistrationPath != "" && !filepath.IsAbs(o.kubeletRegistrationPath) {
		errs = append(errs, fmt.Errorf("--kubelet-registration-path: %q must be an absolute path", o.kubeletRegistrationPath))
	}
	if o.kubeletRegistrationPath != "" && !filepath.IsAbs(o.pluginRegistryDir) {
		errs = append(errs, fmt.Errorf("--plugin-registration-dir: %q must be an absolute path", o.pluginRegistryDir))
	}
	if err := o.validatePeer(); err != nil {
		errs = append(errs, err)
	}
	if o.poolRetry <= 0 {
		errs = append(errs, fmt.Errorf("--pool-retry-interval: %v must be positive", o.poolRetry))
	}
	if o.copyStallTimeout <= 0 {
		// 0 would not mean "never": the runtime would take the default.
		errs = append(errs, fmt.Errorf("--copy-stall-timeout: %v must be positive", o.copyStallTimeout))
	}
	if o.shutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace: %v must be positive", o.shutdownGrace))
	}
	cfg := o.driverConfig()
	if cfg.Pools == nil {
		cfg.Pools = &pool.Set{} // already reported above, once
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	return cli.Usage(errs...)
}

func (o *options) driverConfig() handlers.Config {
	return handlers.Config{
		DriverName:        o.driverName,
		VendorVersion:     o.vendorVersion,
		MaxVolumesPerNode: o.maxVolumes,
		ControllerOnly:    o.controllerOnly,
		Config: pools.Config{
			NodeID:           o.nodeID,
			HostRootRef:      hostRootRef(o.socketPath),
			Pools:            o.pools,
			ReservationAware: o.reservationAware,
			StatsCacheTTL:    o.statsCacheTTL,
			StatsTimeout:     o.statsTimeout,
			CopyStallTimeout: o.copyStallTimeout,
		},
	}
}

// validatePeer checks --peer-address, --peer-cert-dir and --peer-ca-bundle.
func (o *options) validatePeer() error {
	if o.peerAddress == "" {
		if o.peerCertDir != "" {
			return errors.New("--peer-cert-dir: only used with --peer-address (cross-node clones are off without it)")
		}
		if o.peerCABundle != "" {
			return errors.New("--peer-ca-bundle: only used with --peer-address (cross-node clones are off without it)")
		}
		if o.flags != nil && o.flags.Changed("copy-stall-timeout") {
			return errors.New("--copy-stall-timeout: only used with --peer-address (cross-node clones are off without it)")
		}
		return nil
	}
	var errs []error
	if _, port, err := net.SplitHostPort(o.peerAddress); err != nil {
		errs = append(errs, fmt.Errorf("--peer-address: %q is not host:port: %w", o.peerAddress, err))
	} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		errs = append(errs, fmt.Errorf("--peer-address: port %q must be a number from 1 to 65535 (the other nodes dial the same port)", port))
	}
	if o.peerCertDir == "" {
		errs = append(errs, errors.New("--peer-cert-dir: required with --peer-address (tls.crt, tls.key, ca.crt)"))
	}
	return errors.Join(errs...)
}

// peerPort is the port of --peer-address (validated).
func (o *options) peerPort() string {
	_, port, _ := net.SplitHostPort(o.peerAddress)
	return port
}

// parsePools reads --datadir; relative paths are taken relative to the
// working directory, as the KubeVirt driver does.
func parsePools(datadir string) (*pool.Set, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory for relative pool paths: %w", err)
	}
	return pool.ParseRelativeTo([]byte(datadir), wd)
}

// completeMetricsTLS turns the KubeVirt plugin's metrics TLS flags into the
// TLS settings: any of them given means TLS.
func (o *options) completeMetricsTLS(fs *pflag.FlagSet) error {
	if !fs.Changed("metrics-cert-file") && !fs.Changed("metrics-key-file") && !fs.Changed("metrics-tls-version") {
		return nil
	}
	var errs []error
	v, err := serve.ParseTLSVersion(o.metricsTLSVersion)
	if err != nil {
		errs = append(errs, fmt.Errorf("--metrics-tls-version: %w", err))
	}
	if (o.metricsCertFile == "") != (o.metricsKeyFile == "") {
		errs = append(errs, errors.New("--metrics-cert-file and --metrics-key-file: give both (or neither, for a self-signed certificate)"))
	}
	if o.metricsAddress == "" {
		o.metricsAddress = defaultTLSMetricsAddress
	}
	// Names a scraper may verify the self-signed certificate against, from
	// the downward API as the KubeVirt plugin reads them.
	var hosts []string
	for _, env := range []string{"POD_IP", "SERVICE_NAME"} {
		if h := os.Getenv(env); h != "" {
			hosts = append(hosts, h)
		}
	}
	o.metricsTLS = &serve.MetricsTLS{CertFile: o.metricsCertFile, KeyFile: o.metricsKeyFile, MinVersion: v, Hosts: hosts}
	return errors.Join(errs...)
}

// hostRootRef is the socket's directory: kubelet's plugin directory on the
// host, mounted with hostPath in a DaemonSet, so on the host's root
// filesystem wherever kubelet keeps its state there.
func hostRootRef(socketPath string) string {
	if socketPath == "" {
		return ""
	}
	return filepath.Dir(socketPath)
}
