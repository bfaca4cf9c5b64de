package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/logging"
)

// envFlags maps the environment variables of the KubeVirt provisioner's
// DaemonSet (and ours) to flags; the command line wins.
var envFlags = []cli.EnvVar{
	{Flag: "node-name", Env: "NODE_NAME"},
	{Flag: "pv-dir", Env: "PV_DIR"},
	{Flag: "use-naming-prefix", Env: "USE_NAMING_PREFIX"},
	{Flag: "kubeconfig", Env: "KUBECONFIG"},
}

// options are the command's flags.
type options struct {
	NodeName        string
	PVDir           string
	UseNamingPrefix string // "true"/"false" in any case, as the operator writes it
	Kubeconfig      string
	HTTPAddress     string
	ReservedBytes   string // a quantity, e.g. 1Gi
	ReservedPercent float64
	Workers         int
	KubeAPIQPS      float32
	KubeAPIBurst    int
	ResyncPeriod    time.Duration
	ShutdownTimeout time.Duration
	Logging         logging.Options

	// filled by Validate from UseNamingPrefix and the Reserved* flags
	prefix   bool
	headroom capacity.Headroom
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", "", "name of the node this process serves (env NODE_NAME; required)")
	fs.StringVar(&o.PVDir, "pv-dir", "", "directory holding the volumes, the same path on the host and in the container (env PV_DIR; required)")
	fs.StringVar(&o.UseNamingPrefix, "use-naming-prefix", "false", "name directories <claim name>-<PV name> instead of <PV name>: true or false (env USE_NAMING_PREFIX)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty means the in-cluster service account (env KUBECONFIG)")
	fs.StringVar(&o.HTTPAddress, "http-address", ":8080", "address serving /metrics and /healthz; empty disables it")
	fs.StringVar(&o.ReservedBytes, "reserved-bytes", "0", "space in PV_DIR never offered to new volumes, as a quantity (e.g. 10Gi); the larger of this and --reserved-percent applies")
	fs.Float64Var(&o.ReservedPercent, "reserved-percent", 0, "percentage of PV_DIR's filesystem never offered to new volumes, 0 to less than 100")
	fs.IntVar(&o.Workers, "worker-threads", 4, "claims and volumes processed in parallel")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 20, "API server queries per second")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 50, "API server burst")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", 15*time.Minute, "how often every claim and volume is looked at again")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a SIGTERM waits for volume operations in flight")
	o.Logging.AddFlags(fs)
}

// Validate names each bad setting by its environment variable and flag and
// says why (all of them in one error), normalises PV_DIR to a clean path and
// parses USE_NAMING_PREFIX and the headroom for Run.
func (o *options) Validate() error {
	var errs []error
	bad := func(env, flag, format string, args ...any) {
		name := "--" + flag
		if env != "" {
			name = env + " (--" + flag + ")"
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if o.NodeName == "" {
		bad("NODE_NAME", "node-name", "required: the name of the node this process runs on (from the pod's spec.nodeName)")
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		bad("NODE_NAME", "node-name", "%q is not a node name: %s", o.NodeName, strings.Join(msgs, "; "))
	}
	// PV_DIR is a pool directory: the pool-path rule, cleaned.
	switch dir, problem, reason := fieldrule.CheckPoolPath(o.PVDir); problem {
	case fieldrule.PathOK:
		o.PVDir = dir
	case fieldrule.PathMissing:
		bad("PV_DIR", "pv-dir", "required: the directory on the node that holds the volumes")
	default:
		bad("PV_DIR", "pv-dir", "%s", reason)
	}
	var err error
	if o.prefix, err = o.namingPrefix(); err != nil {
		bad("USE_NAMING_PREFIX", "use-naming-prefix", "%v", err)
	}
	if o.headroom, err = o.parseHeadroom(); err != nil {
		bad("", "reserved-bytes/--reserved-percent", "%v", err)
	}
	if o.Workers < 1 {
		bad("", "worker-threads", "%d must be at least 1", o.Workers)
	}
	if o.KubeAPIQPS <= 0 {
		bad("", "kube-api-qps", "%v must be more than 0", o.KubeAPIQPS)
	}
	if o.KubeAPIBurst < 1 {
		bad("", "kube-api-burst", "%d must be at least 1", o.KubeAPIBurst)
	}
	if o.ResyncPeriod < time.Minute {
		bad("", "resync-period", "%s must be at least 1m", o.ResyncPeriod)
	}
	if o.ShutdownTimeout <= 0 {
		bad("", "shutdown-timeout", "%s must be more than 0", o.ShutdownTimeout)
	}
	return cli.Usage(append(errs, o.Logging.Validate()...)...)
}

func (o *options) namingPrefix() (bool, error) {
	switch {
	case strings.EqualFold(o.UseNamingPrefix, "true"):
		return true, nil
	case strings.EqualFold(o.UseNamingPrefix, "false"), o.UseNamingPrefix == "":
		return false, nil
	}
	return false, fmt.Errorf("%q is neither true nor false", o.UseNamingPrefix)
}

func (o *options) parseHeadroom() (capacity.Headroom, error) {
	q, err := resource.ParseQuantity(o.ReservedBytes)
	if err != nil {
		return capacity.Headroom{}, fmt.Errorf("reserved bytes %q is not a quantity such as 10Gi: %w", o.ReservedBytes, err)
	}
	h := capacity.Headroom{Bytes: q.Value(), Percent: o.ReservedPercent}
	if err := h.Validate("headroom"); err != nil {
		return capacity.Headroom{}, err
	}
	return h, nil
}
