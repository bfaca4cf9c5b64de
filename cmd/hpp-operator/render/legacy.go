package render

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// LegacyDaemonSet runs hpp-legacy for a pathConfig CR. The directory is
// mounted at the same path as on the host: hostPath PVs name host paths.
func (c *Config) LegacyDaemonSet(spec *hppv1.HostPathProvisionerSpec) *appsv1.DaemonSet {
	pc := spec.PathConfig
	labels := c.labels(LegacyDaemonSetName)
	ctr := corev1.Container{
		Name:            LegacyDaemonSetName,
		Image:           c.Images.Legacy,
		ImagePullPolicy: c.ImagePullPolicy,
		Args:            []string{"--http-address=:" + strconv.Itoa(legacyHTTPPort)},
		Env: []corev1.EnvVar{
			{Name: "USE_NAMING_PREFIX", Value: strconv.FormatBool(pc.UseNamingPrefix)},
			nodeNameEnv,
			{Name: "PV_DIR", Value: pc.Path},
		},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: legacyHTTPPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("http")}},
			InitialDelaySeconds: 10, TimeoutSeconds: 3, PeriodSeconds: 10, FailureThreshold: 5,
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: "pv-volume", MountPath: pc.Path}},
		Resources:                requests("10m", "40Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: LegacyDaemonSetName, Namespace: c.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: LegacyDaemonSetName}},
			UpdateStrategy: oneNodeAtATime(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: c.podAnnotations(LegacySCCName)},
				Spec: c.nodePodSpec(spec, LegacyServiceAccount, []corev1.Container{ctr},
					[]corev1.Volume{hostPathVolume("pv-volume", pc.Path, corev1.HostPathDirectoryOrCreate)}),
			},
		},
	}
}
