package adopt

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

func TestMounterOrigin(t *testing.T) {
	cfg := render.DefaultConfig()
	spec := &hppv1.HostPathProvisionerSpec{}
	pool := &hppv1.StoragePool{Name: "fast", Path: "/var/fast", PVCTemplate: &corev1.PersistentVolumeClaimSpec{}}
	ours := cfg.MounterDeployment(spec, pool, "node-1")
	if p, dir, n := MounterOrigin(ours); p != "fast" || dir != "/var/fast" || n != "node-1" {
		t.Errorf("hpp's mounter: %s %s %s", p, dir, n)
	}
	// Upstream's mounter, as its operator renders it: no annotations, the
	// pool in the pod label, the node in a hostname affinity, the path in
	// separate command arguments.
	upstream := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"hpp-pool": "fast"}},
		Spec: corev1.PodSpec{
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}}}}}},
			Containers: []corev1.Container{{Name: "mounter", Command: []string{"/usr/bin/mounter",
				"--storagePoolPath", "/dev/data", "--mountPath", "/var/fast/csi", "--hostPath", "/host"}}},
		}}}}
	if p, dir, n := MounterOrigin(upstream); p != "fast" || dir != "/var/fast" || n != "node-2" {
		t.Errorf("upstream's mounter: %q %q %q", p, dir, n)
	}
}
