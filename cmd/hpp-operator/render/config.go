// Package render builds every object the operator creates, as typed objects,
// from a HostPathProvisioner and the operator's configuration.
//
// It is the one source of hpp's manifests: the reconciler applies what it
// returns, and `make generate` writes the same objects (rendered from an
// example configuration) into deploy/base, so the kustomize install and the
// operator cannot drift; `make lint` fails when deploy/ is stale.
package render

import (
	"errors"
	"fmt"
	"path"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Object names kept from the KubeVirt operator: users, tooling and takeover
// of an existing installation rely on them. The drivers' names are in
// internal/contract.
const (
	CSIDaemonSetName     = "hostpath-provisioner-csi"
	CSIServiceAccount    = "hostpath-provisioner-admin-csi"
	LegacyDaemonSetName  = "hostpath-provisioner"
	LegacyServiceAccount = "hostpath-provisioner-admin"
	// CSIContainerName is the driver's container in the CSI DaemonSet.
	CSIContainerName = "hostpath-provisioner"
)

// Labels every object carries. AppLabel alone selects pods: a selector must
// only hold labels that never change (a version label there breaks
// upgrades, as it did upstream).
const (
	AppLabel       = "k8s-app"
	PartOfLabel    = "app.kubernetes.io/part-of"
	VersionLabel   = "app.kubernetes.io/version"
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ComponentLabel = "app.kubernetes.io/component"
	// PartOf is the part-of value when no installer names one
	// (INSTALLER_PART_OF_LABEL).
	PartOf = "hostpath-provisioner"
	// Component is upstream's component value, on every object.
	Component = "storage"
	// DefaultMetricsTLSVersion is the minimum TLS version of hpp-csi's
	// /metrics under the default (Intermediate) profile.
	DefaultMetricsTLSVersion = "VersionTLS12"
)

// Images are the container images, from the operator's environment
// (docs/design.md names the variables under the compatibility contract).
type Images struct {
	CSI                 string // CSI_PROVISIONER_IMAGE: hpp-csi
	Legacy              string // PROVISIONER_IMAGE: hpp-legacy
	Provisioner         string // CSI_SIG_STORAGE_PROVISIONER_IMAGE: csi-provisioner
	NodeDriverRegistrar string // NODE_DRIVER_REG_IMAGE: optional sidecar
	LivenessProbe       string // LIVENESS_PROBE_IMAGE: optional sidecar
	Snapshotter         string // CSI_SNAPSHOT_IMAGE: with the Snapshotting gate
	Resizer             string // CSI_RESIZER_IMAGE: csi-resizer (hpp's own variable)
	Mounter             string // MOUNTER_IMAGE: pvcTemplate pools
}

// Config is everything about the objects that does not come from the CR.
type Config struct {
	Namespace string
	Images    Images
	// KubeletDir is kubelet's root directory on the nodes.
	KubeletDir string
	// Version is passed to hpp-csi's --version and set as a label value.
	Version string
	// Verbosity is the components' --v.
	Verbosity int
	// PriorityClassName of the node pods; empty for none. The operator
	// checks that it exists before using it.
	PriorityClassName string
	// ManagedBy is the managed-by label value.
	ManagedBy string
	// Provisioner tuning (csi-provisioner flags), from the benchmarks: the
	// defaults (5/10 QPS/burst, 100 workers... ) make deleting many volumes
	// slow on a busy API server.
	KubeAPIQPS    int
	KubeAPIBurst  int
	WorkerThreads int
	// MonitoringNamespace is where the cluster's Prometheus runs (env
	// MONITORING_NAMESPACE; default "monitoring"): its prometheus-k8s
	// ServiceAccount is granted discovery of the metrics endpoints.
	MonitoringNamespace string
	// RunbookURLTemplate is each alert's runbook_url, the alert name in its
	// %s (env RUNBOOK_URL_TEMPLATE; default KubeVirt's runbooks).
	RunbookURLTemplate string
	// InstallerPartOf and InstallerVersion are the part-of and version
	// label values an installer (HCO, OLM) gives the operator through
	// INSTALLER_PART_OF_LABEL and INSTALLER_VERSION_LABEL, as upstream's
	// operator takes them; empty: hpp's part-of and no version label.
	InstallerPartOf  string
	InstallerVersion string
	// MetricsTLSVersion is hpp-csi's --metrics-tls-version (VersionTLS12,
	// VersionTLS13): the minimum of the cluster's TLS profile, as upstream
	// passes it to its driver. Empty: DefaultMetricsTLSVersion.
	MetricsTLSVersion string
	// PrometheusOperator: the cluster serves prometheus-operator's API
	// (ServiceMonitor, PrometheusRule), found at the operator's start.
	PrometheusOperator bool
	// OpenShift: the cluster serves SecurityContextConstraints
	// (security.openshift.io/v1), found at the operator's start. The node
	// pods then get SCCs of their own and the required-scc annotation.
	OpenShift bool
	// PeerTransport: hpp-csi serves and fetches the sources of cross-node
	// clones (peer.go: its flags, port, certificate volumes and API
	// access), with its certificate from the operator's signer. The
	// operator turns it on, and ForCR off again for a CR with
	// spec.crossNodeClones false; deploy/'s csi-only base leaves it off,
	// as nothing there signs the certificates (components/cross-node-clones
	// adds it, deploy/README.md).
	PeerTransport bool

	// Observed by the operator at each reconcile (zero in deploy/):
	// HeldNodes are nodes outside spec.workload's placement that still
	// hold volumes of the driver: the CSI DaemonSet stays there too.
	HeldNodes []string
	// PluginDir is the host directory of the driver's socket, where
	// kubelet dials it; "" is hpp's <KubeletDir>/plugins/<driver>. An
	// install taken over keeps the one kubelet has registered (upstream's
	// UpstreamPluginDir): kubelet keeps dialling the registered socket.
	PluginDir string
	// ImagePullPolicy of every container: DefaultConfig's IfNotPresent,
	// or the CR's spec.imagePullPolicy when it names one (ForCR). Decided
	// once per pass, so every object's builder reads the same value.
	ImagePullPolicy corev1.PullPolicy
}

// ForCR is the configuration to render a CR's objects with: the values the
// CR itself decides (its pull policy, whether cross-node clones are on)
// filled in. The CR can only turn the peer transport off: where the
// operator's configuration has it off, nothing would sign the
// certificates.
func (c Config) ForCR(spec *hppv1.HostPathProvisionerSpec) Config {
	if spec.ImagePullPolicy != "" {
		c.ImagePullPolicy = spec.ImagePullPolicy
	}
	c.PeerTransport = c.PeerTransport && spec.CrossNodeClonesOn()
	return c
}

// UpstreamPluginDir is the plugin directory (under the kubelet root) of
// upstream's CSI DaemonSet.
const UpstreamPluginDir = "plugins/csi-hostpath"

// pluginDir is the host directory of the driver's socket.
func (c *Config) pluginDir() string {
	if c.PluginDir != "" {
		return c.PluginDir
	}
	return path.Join(c.KubeletDir, "plugins", contract.DriverName)
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config {
	return Config{
		Namespace:     "hostpath-provisioner",
		KubeletDir:    "/var/lib/kubelet",
		Version:       "dev",
		Verbosity:     3,
		ManagedBy:     "hpp-operator",
		KubeAPIQPS:    50,
		KubeAPIBurst:  100,
		WorkerThreads: 20,
		// Upstream's operator writes IfNotPresent when the CR names none.
		ImagePullPolicy: corev1.PullIfNotPresent,
		Images: Images{
			CSI:         "hpp-csi",
			Legacy:      "hpp-legacy",
			Provisioner: "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0",
			Snapshotter: "registry.k8s.io/sig-storage/csi-snapshotter:v8.7.0",
			Resizer:     "registry.k8s.io/sig-storage/csi-resizer:v2.3.0",
			Mounter:     "hpp-mounter",
		},
	}
}

// Validate names every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace: required"))
	}
	if !path.IsAbs(c.KubeletDir) || path.Clean(c.KubeletDir) != c.KubeletDir {
		errs = append(errs, fmt.Errorf("kubelet directory: %q must be a clean absolute path", c.KubeletDir))
	}
	switch c.MetricsTLSVersion {
	case "", "VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13":
	default:
		errs = append(errs, fmt.Errorf("metrics TLS version: %q is not one of VersionTLS10..VersionTLS13", c.MetricsTLSVersion))
	}
	return errors.Join(append(errs, c.ValidateEnvironment())...)
}

// ValidateEnvironment names every problem with what the operator's
// environment sets (images, labels, monitoring), by variable name; the
// operator checks its flags (namespace, kubelet directory) itself.
func (c *Config) ValidateEnvironment() error {
	var errs []error
	for _, img := range [][2]string{{"CSI_PROVISIONER_IMAGE", c.Images.CSI},
		{"PROVISIONER_IMAGE", c.Images.Legacy}, {"CSI_SIG_STORAGE_PROVISIONER_IMAGE", c.Images.Provisioner}, {"CSI_RESIZER_IMAGE", c.Images.Resizer}} {
		if img[1] == "" {
			errs = append(errs, fmt.Errorf("%s: required", img[0]))
		}
	}
	if c.RunbookURLTemplate != "" {
		errs = append(errs, ValidateRunbookURLTemplate(c.RunbookURLTemplate))
	}
	for _, l := range [][2]string{{"INSTALLER_PART_OF_LABEL", c.InstallerPartOf}, {"INSTALLER_VERSION_LABEL", c.InstallerVersion}} {
		for _, msg := range validation.IsValidLabelValue(l[1]) {
			errs = append(errs, fmt.Errorf("%s: %q is not a label value: %s", l[0], l[1], msg))
		}
	}
	if (c.Images.NodeDriverRegistrar == "") != (c.Images.LivenessProbe == "") {
		errs = append(errs, errors.New("NODE_DRIVER_REG_IMAGE and LIVENESS_PROBE_IMAGE: set both (use the sidecars) or neither (hpp-csi registers itself and serves /healthz)"))
	}
	return errors.Join(errs...)
}

// labels are upstream's recommended labels (component storage, the
// installer's part-of and version) with hpp's app and managed-by values.
func (c *Config) labels(app string) map[string]string {
	l := map[string]string{
		AppLabel:       app,
		PartOfLabel:    PartOf,
		ManagedByLabel: c.ManagedBy,
		ComponentLabel: Component,
	}
	if c.InstallerPartOf != "" {
		l[PartOfLabel] = c.InstallerPartOf
	}
	if c.InstallerVersion != "" {
		l[VersionLabel] = c.InstallerVersion
	}
	return l
}

func (c *Config) metricsTLSVersion() string {
	if c.MetricsTLSVersion == "" {
		return DefaultMetricsTLSVersion
	}
	return c.MetricsTLSVersion
}

func (c *Config) sidecars() bool { return c.Images.NodeDriverRegistrar != "" }
