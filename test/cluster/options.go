package cluster

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Options configure a cluster. The zero value plus Binaries is a working
// single-node cluster.
type Options struct {
	Binaries Binaries
	// BaseDir holds the cluster's temporary directory; os.TempDir() when
	// empty. Keep it short: unix socket paths under it must stay below 108
	// bytes.
	BaseDir string
	// NodeName of the real node; "hpp-node" when empty.
	NodeName string
	// MaxPods on the real node; 500 when zero (kubelet's default 110 is
	// too few for the benchmark).
	MaxPods int
	// PodCIDR the real node's CNI bridge hands addresses from; a /22 so
	// more than 250 pods fit. 10.244.0.0/22 when empty. Without
	// PodNetwork pods only talk to nothing: the bridge has no gateway and
	// no masquerading.
	PodCIDR string
	// Bridge is the CNI bridge's interface name; "hpp0" when empty.
	Bridge string
	// Images are imported into containerd besides pause and busybox.
	Images []Image
	// Logf receives progress lines (component started, ready, teardown);
	// discarded when nil.
	Logf func(format string, args ...any)
	// HandleSignals makes SIGINT and SIGTERM tear the cluster down and exit
	// the process with status 130, so an interrupted test leaves nothing.
	HandleSignals bool
	// KubeletVerbosity is kubelet's -v; 2 when zero.
	KubeletVerbosity int
	// ControlPlaneQPS, when set, is the --kube-api-qps of
	// kube-controller-manager and kube-scheduler (burst twice that). Zero
	// keeps their defaults (20 and 50), which cap binding at about 4
	// claims per second: the controller-manager's PV binder makes ~5
	// calls per claim. Benchmarks raise it to measure the provisioner.
	ControlPlaneQPS int
	// PodNetwork lets pods and the control plane reach each other, as
	// components installed as pods need (an operator Deployment, a CSI
	// DaemonSet's csi-provisioner, kubelet's HTTP probes, the API server
	// calling a webhook): the bridge gets the pod CIDR's first address
	// (so this machine routes the pod CIDR to it, not out of the VM),
	// kube-apiserver listens on every address, and kube-proxy (iptables
	// mode, Binaries.KubeProxy) routes every Service's ClusterIP — the
	// kubernetes Service for in-cluster clients, a webhook's Service for
	// kube-apiserver. Stop runs `kube-proxy --cleanup` and sweeps its
	// KUBE- chains like kubelet's. Off by default: the other tiers need
	// none of it and keep this machine's host untouched.
	PodNetwork bool
	// StandardKubeletRoot runs kubelet with --root-dir=/var/lib/kubelet
	// inside the node's mount namespace (the same directory as KubeletDir,
	// see nodens_linux.go), so the paths kubelet hands to CSI drivers and
	// plugin sockets are the ones a deploy/ DaemonSet mounts. Host
	// processes (StartHPPCSI) cannot use those paths: only for drivers
	// that run as pods.
	StandardKubeletRoot bool
	// AuditLog makes kube-apiserver write a Metadata-level audit log to
	// AuditLogPath (e.g. to count 403s a component got).
	AuditLog bool
}

// withDefaults fills the defaults documented on Options.
func (o Options) withDefaults() Options {
	if o.NodeName == "" {
		o.NodeName = "hpp-node"
	}
	if o.MaxPods == 0 {
		o.MaxPods = 500
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.244.0.0/22"
	}
	if o.Bridge == "" {
		o.Bridge = "hpp0"
	}
	if o.KubeletVerbosity == 0 {
		o.KubeletVerbosity = 2
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Validate reports every problem at once, each naming its field.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if err := o.Binaries.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.BaseDir != "" && !filepath.IsAbs(o.BaseDir) {
		errs = append(errs, fmt.Errorf("options.BaseDir %q: must be absolute", o.BaseDir))
	}
	if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("options.NodeName %q: %v", o.NodeName, msgs))
	}
	if o.MaxPods < 1 {
		errs = append(errs, fmt.Errorf("options.MaxPods %d: must be positive", o.MaxPods))
	}
	if _, n, err := net.ParseCIDR(o.PodCIDR); err != nil {
		errs = append(errs, fmt.Errorf("options.PodCIDR %q: %w", o.PodCIDR, err))
	} else if ones, _ := n.Mask.Size(); ones > 29 {
		errs = append(errs, fmt.Errorf("options.PodCIDR %q: prefix /%d leaves no room for pods", o.PodCIDR, ones))
	}
	if len(o.Bridge) == 0 || len(o.Bridge) > 15 {
		errs = append(errs, fmt.Errorf("options.Bridge %q: interface names have 1 to 15 characters", o.Bridge))
	}
	for i, img := range o.Images {
		if err := img.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("options.Images[%d]: %w", i, err))
		}
	}
	if o.PodNetwork {
		if err := checkExecutable("KubeProxy", o.Binaries.KubeProxy, fixBuild); err != nil {
			errs = append(errs, fmt.Errorf("options.PodNetwork needs kube-proxy: %w", err))
		}
	}
	if o.ControlPlaneQPS < 0 {
		errs = append(errs, fmt.Errorf("options.ControlPlaneQPS %d: must not be negative", o.ControlPlaneQPS))
	}
	if o.KubeletVerbosity < 0 {
		errs = append(errs, fmt.Errorf("options.KubeletVerbosity %d: must not be negative", o.KubeletVerbosity))
	}
	return errors.Join(errs...)
}
