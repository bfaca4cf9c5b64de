package render

import (
	"fmt"
	"path"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

const (
	csiSocketDir = "/csi"
	csiSocket    = "unix:///csi/csi.sock"
	healthPort   = 9898
	// legacyHTTPPort is hpp-legacy's /healthz and /metrics (plain HTTP;
	// upstream's legacy provisioner serves none).
	legacyHTTPPort = 8080
	registrationD  = "/registration"
)

// CSIDaemonSet is hpp-csi and csi-provisioner on every node the workload
// placement allows. hpp-csi registers with kubelet itself and serves
// /healthz unless the registrar and livenessprobe sidecar images are set.
func (c *Config) CSIDaemonSet(spec *hppv1.HostPathProvisionerSpec) (*appsv1.DaemonSet, error) {
	datadir, err := datadirOf(spec)
	if err != nil {
		return nil, err
	}
	pp := c.ImagePullPolicy
	pluginDir := c.pluginDir()
	podsDir := path.Join(c.KubeletDir, "pods")
	bidi := corev1.MountPropagationBidirectional

	args := []string{
		"--drivername=" + contract.DriverName,
		"--v=" + strconv.Itoa(c.Verbosity),
		"--endpoint=" + csiSocket,
		"--nodeid=$(NODE_NAME)",
		"--version=" + c.Version,
		"--datadir=$(PV_DIR)",
		// Upstream's driver flags: /metrics over TLS (self-signed) at the
		// cluster profile's minimum version.
		"--metrics-address=:" + strconv.Itoa(MetricsPort),
		"--metrics-tls-version=" + c.metricsTLSVersion(),
		"--check-binding-mode",
	}
	mounts := []corev1.VolumeMount{
		{Name: "socket-dir", MountPath: csiSocketDir},
		{Name: "mountpoint-dir", MountPath: podsDir, MountPropagation: &bidi},
	}
	volumes := []corev1.Volume{
		hostPathVolume("socket-dir", pluginDir, corev1.HostPathDirectoryOrCreate),
		hostPathVolume("mountpoint-dir", podsDir, corev1.HostPathDirectoryOrCreate),
		hostPathVolume("registration-dir", path.Join(c.KubeletDir, "plugins_registry"), corev1.HostPathDirectory),
	}
	if !c.sidecars() {
		args = append(args,
			"--kubelet-registration-path="+path.Join(pluginDir, "csi.sock"),
			"--plugin-registration-dir="+registrationD,
			"--health-address=:"+strconv.Itoa(healthPort))
		mounts = append(mounts, corev1.VolumeMount{Name: "registration-dir", MountPath: registrationD})
	}
	mounts, volumes = withDataDirs(spec, mounts, volumes)

	driver := corev1.Container{
		Name:            CSIContainerName,
		Image:           c.Images.CSI,
		ImagePullPolicy: pp,
		Args:            args,
		Env: []corev1.EnvVar{
			nodeNameEnv,
			{Name: "PV_DIR", Value: datadir},
		},
		Ports: []corev1.ContainerPort{
			{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("healthz")}},
			InitialDelaySeconds: 10, TimeoutSeconds: 3, PeriodSeconds: 10, FailureThreshold: 5,
		},
		// Bind mounts into pods need privilege; nothing else here does.
		SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:             mounts,
		Resources:                requests("10m", "40Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	volumes = c.withPeer(&driver, volumes)
	containers := []corev1.Container{driver, c.provisionerContainer(pp)}
	if c.sidecars() {
		containers = append(containers, c.registrarContainer(pp, pluginDir), c.livenessContainer(pp))
	}
	if spec.HasFeature(hppv1.FeatureSnapshotting) {
		containers = append(containers, c.snapshotterContainer(pp))
	}

	labels := c.labels(CSIDaemonSetName)
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: CSIDaemonSetName, Namespace: c.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: CSIDaemonSetName}},
			UpdateStrategy: oneNodeAtATime(),
			Template: corev1.PodTemplateSpec{
				// The metrics Service selects the pods by PrometheusLabel
				// (a template label, never in the selector).
				ObjectMeta: metav1.ObjectMeta{Labels: withLabel(labels, PrometheusLabel, "true"),
					Annotations: c.podAnnotations(CSISCCName)},
				Spec: c.nodePodSpec(spec, CSIServiceAccount, containers, volumes),
			},
		},
	}
	keepOn(ds, c.HeldNodes)
	return ds, nil
}

// oneNodeAtATime rolls a node DaemonSet one node at a time: a node whose
// plugin restarts cannot mount or unmount volumes meanwhile, so more at
// once is the user's choice (the reconciler keeps a maxUnavailable the
// user set on the live object).
func oneNodeAtATime() appsv1.DaemonSetUpdateStrategy {
	return appsv1.DaemonSetUpdateStrategy{
		Type:          appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
	}
}

func (c *Config) provisionerContainer(pp corev1.PullPolicy) corev1.Container {
	return corev1.Container{
		Name:            "csi-provisioner",
		Image:           c.Images.Provisioner,
		ImagePullPolicy: pp,
		Args: []string{
			"--csi-address=" + path.Join(csiSocketDir, "csi.sock"),
			"--v=" + strconv.Itoa(c.Verbosity),
			"--node-deployment=true",
			"--enable-capacity=true",
			// 1: the CSIStorageCapacity objects are owned by the DaemonSet,
			// so they go away with it and survive pod restarts.
			"--capacity-ownerref-level=1",
			"--strict-topology=true",
			"--immediate-topology=false",
			"--extra-create-metadata=true",
			"--feature-gates=Topology=true",
			fmt.Sprintf("--kube-api-qps=%d", c.KubeAPIQPS),
			fmt.Sprintf("--kube-api-burst=%d", c.KubeAPIBurst),
			fmt.Sprintf("--worker-threads=%d", c.WorkerThreads),
		},
		Env: []corev1.EnvVar{
			nodeNameEnv,
			namespaceEnv,
			podNameEnv,
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: "socket-dir", MountPath: csiSocketDir}},
		Resources:                requests("10m", "40Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func (c *Config) registrarContainer(pp corev1.PullPolicy, pluginDir string) corev1.Container {
	return corev1.Container{
		Name:            "node-driver-registrar",
		Image:           c.Images.NodeDriverRegistrar,
		ImagePullPolicy: pp,
		Args: []string{
			"--v=" + strconv.Itoa(c.Verbosity),
			"--csi-address=" + path.Join(csiSocketDir, "csi.sock"),
			"--kubelet-registration-path=" + path.Join(pluginDir, "csi.sock"),
		},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "socket-dir", MountPath: csiSocketDir},
			{Name: "registration-dir", MountPath: registrationD},
		},
		Resources:                requests("5m", "20Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func (c *Config) livenessContainer(pp corev1.PullPolicy) corev1.Container {
	return corev1.Container{
		Name:            "liveness-probe",
		Image:           c.Images.LivenessProbe,
		ImagePullPolicy: pp,
		Args: []string{
			"--csi-address=" + path.Join(csiSocketDir, "csi.sock"),
			"--health-port=" + strconv.Itoa(healthPort),
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: "socket-dir", MountPath: csiSocketDir}},
		Resources:                requests("5m", "20Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func (c *Config) snapshotterContainer(pp corev1.PullPolicy) corev1.Container {
	return corev1.Container{
		Name:            "csi-snapshotter",
		Image:           c.Images.Snapshotter,
		ImagePullPolicy: pp,
		Args: []string{
			"--v=" + strconv.Itoa(c.Verbosity),
			"--csi-address=" + path.Join(csiSocketDir, "csi.sock"),
			"--node-deployment=true",
		},
		Env:                      []corev1.EnvVar{nodeNameEnv},
		VolumeMounts:             []corev1.VolumeMount{{Name: "socket-dir", MountPath: csiSocketDir}},
		Resources:                requests("10m", "20Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// nodePodSpec is the pod spec of every node DaemonSet: the CR's workload
// placement, the priority class, the RuntimeDefault seccomp profile.
func (c *Config) nodePodSpec(spec *hppv1.HostPathProvisionerSpec, sa string, containers []corev1.Container, volumes []corev1.Volume) corev1.PodSpec {
	w := spec.Workload.DeepCopy()
	return corev1.PodSpec{
		ServiceAccountName: sa,
		Containers:         containers,
		Volumes:            volumes,
		NodeSelector:       w.NodeSelector,
		Tolerations:        w.Tolerations,
		Affinity:           w.Affinity,
		PriorityClassName:  c.PriorityClassName,
		SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// The downward-API variables the pods read, made once: every container
// shares them (rendered objects are serialized, never changed in place).
var (
	nodeNameEnv  = fieldEnv("NODE_NAME", "spec.nodeName")
	namespaceEnv = fieldEnv("NAMESPACE", "metadata.namespace")
	podNameEnv   = fieldEnv("POD_NAME", "metadata.name")
)

func fieldEnv(name, fieldPath string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath}}}
}

// requests sets requests and no limits: a node plugin throttled or killed
// for memory takes every volume of its node with it.
func requests(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
	}}
}
