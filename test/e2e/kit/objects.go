package kit

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// StorageClass is an hpp-csi class for one pool, WaitForFirstConsumer and
// reclaim Delete unless changed by the options.
func StorageClass(name, pool string, opts ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       contract.DriverName,
		Parameters:        map[string]string{contract.ParamStoragePool: pool},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	for _, o := range opts {
		o(sc)
	}
	return sc
}

// Retain sets reclaim policy Retain.
func Retain(sc *storagev1.StorageClass) {
	sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
}

// Immediate sets binding mode Immediate (which hpp-csi refuses).
func Immediate(sc *storagev1.StorageClass) {
	sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
}

// LocalPV offers path on node (a directory, or a block device for mode
// Block) as a ReadWriteOnce local PV of class with reclaim policy Retain:
// the disk behind it keeps its data.
func LocalPV(name, class, path, node, size string, mode corev1.PersistentVolumeMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			VolumeMode:                    &mode,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// PVC is a ReadWriteOnce filesystem claim of size (e.g. "1Gi").
func PVC(ns, name, storageClass, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(storageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// VolumeSnapshots is the VolumeSnapshot resource, for a dynamic client:
// the snapshot API has no typed client among the tests' dependencies.
var VolumeSnapshots = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}

// VolumeSnapshot is a snapshot of claim in the class the cluster installs
// (cluster.SnapshotClassName).
func VolumeSnapshot(ns, name, claim string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"volumeSnapshotClassName": cluster.SnapshotClassName,
			"source": map[string]any{"persistentVolumeClaimName": claim}},
	}}
}

// PodVolume mounts a claim (or, with Source set, any volume) at Path.
type PodVolume struct {
	Name     string
	Claim    string
	Path     string
	ReadOnly bool
	Source   *corev1.VolumeSource
}

// Pod is a busybox pod that runs script with sh and, by default, never
// restarts. Its volumes are mounted at their paths.
func Pod(ns, name, script string, vols ...PodVolume) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "main", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				// One stream: the container log keeps stdout and stderr
				// as two pipes whose lines interleave in no fixed order,
				// so a test reading the log would depend on timing.
				Command: []string{"sh", "-c", "exec 2>&1; " + script},
			}},
		},
	}
	for _, v := range vols {
		src := v.Source
		if src == nil {
			src = &corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.Claim}}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: *src})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v.Name, MountPath: v.Path, ReadOnly: v.ReadOnly})
	}
	return pod
}

// OnNode pins a pod to a node by its hostname label, through the
// scheduler (not spec.nodeName), so volume binding runs as usual.
func OnNode(pod *corev1.Pod, node string) *corev1.Pod {
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector[corev1.LabelHostname] = node
	return pod
}
