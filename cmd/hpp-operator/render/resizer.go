package render

import (
	"path"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// ResizerName names the expansion controller's Deployment, its
// ServiceAccount and its roles: hpp's own objects (upstream's operator
// deploys no resizer).
const ResizerName = "hostpath-provisioner-csi-resizer"

// resizerRules are what csi-resizer v2.3.0 calls with
// --handle-volume-inuse-error=false (hpp expands online, so it never
// watches pods): PVs and claims through informers; the PV's new capacity
// and the claim's resize status as patches; its event recorder.
var (
	resizerClusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	// Leader election, in the install namespace only.
	resizerNamespaceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}
)

// ResizerObjects are csi-resizer and the endpoint it calls, in apply
// order (identity and permissions before the pod). csi-resizer has no
// per-node mode, so it runs once per cluster, beside hpp-csi
// --controller-only, which answers ControllerExpandVolume without any pool
// and leaves the growth to the node plugin (NodeExpandVolume).
func (c *Config) ResizerObjects(spec *hppv1.HostPathProvisionerSpec) []client.Object {
	return []client.Object{
		c.serviceAccount(ResizerName),
		c.clusterRole(ResizerName, resizerClusterRules),
		c.clusterRoleBinding(ResizerName, ResizerName),
		c.role(ResizerName, resizerNamespaceRules),
		c.roleBinding(ResizerName, ResizerName),
		c.ResizerDeployment(spec),
	}
}

// ResizerDeployment runs csi-resizer and hpp-csi --controller-only in one
// pod, talking over a socket in an emptyDir. One replica, with leader
// election: during a rolling update the new pod waits for the old one's
// lease, so two resizers never act on the same claim. Nothing in it needs
// the host: no privilege, no host paths. It honours the CR's workload
// placement like every pod the operator makes.
func (c *Config) ResizerDeployment(spec *hppv1.HostPathProvisionerSpec) *appsv1.Deployment {
	pp := c.ImagePullPolicy
	sock := path.Join(csiSocketDir, "csi.sock")
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	mounts := []corev1.VolumeMount{{Name: "socket-dir", MountPath: csiSocketDir}}
	driver := corev1.Container{
		Name:            CSIContainerName,
		Image:           c.Images.CSI,
		ImagePullPolicy: pp,
		Args: []string{
			"--drivername=" + contract.DriverName,
			"--v=" + strconv.Itoa(c.Verbosity),
			"--endpoint=" + csiSocket,
			"--version=" + c.Version,
			"--controller-only",
			"--health-address=:" + strconv.Itoa(healthPort),
		},
		Ports: []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("healthz")}},
			InitialDelaySeconds: 10, TimeoutSeconds: 3, PeriodSeconds: 10, FailureThreshold: 5,
		},
		SecurityContext:          restricted,
		VolumeMounts:             mounts,
		Resources:                requests("5m", "20Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	resizer := corev1.Container{
		Name:            "csi-resizer",
		Image:           c.Images.Resizer,
		ImagePullPolicy: pp,
		Args: []string{
			"--csi-address=" + sock,
			"--v=" + strconv.Itoa(c.Verbosity),
			"--leader-election",
			"--leader-election-namespace=$(NAMESPACE)",
			// Online expansion: no pods to watch for volumes in use.
			"--handle-volume-inuse-error=false",
		},
		Env:                      []corev1.EnvVar{namespaceEnv},
		SecurityContext:          restricted,
		VolumeMounts:             mounts,
		Resources:                requests("5m", "30Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	w := spec.Workload.DeepCopy()
	labels := c.labels(ResizerName)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: ResizerName, Namespace: c.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: ResizerName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: ResizerName,
					Containers:         []corev1.Container{driver, resizer},
					Volumes: []corev1.Volume{{Name: "socket-dir", VolumeSource: corev1.VolumeSource{
						EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					NodeSelector:      w.NodeSelector,
					Tolerations:       w.Tolerations,
					Affinity:          w.Affinity,
					PriorityClassName: c.PriorityClassName,
					SecurityContext: &corev1.PodSecurityContext{
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				},
			},
		},
	}
}
