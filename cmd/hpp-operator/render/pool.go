package render

import (
	"path"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Labels and annotations of pvcTemplate pool objects. contract.PoolLabel is
// upstream's key (tooling selects pool PVCs by it); the annotations record
// what a cleanup Job needs, so a pool removed from the CR can still be
// unmounted.
const (
	// PoolSelectorLabel is upstream's mounter selector, hpp-pool=<pool>,
	// kept so that upstream's operator can update a mounter hpp made
	// (it writes the whole spec; a selector is immutable).
	PoolSelectorLabel = "hpp-pool"
	// MounterSelector names a mounter's Deployment in its pods' labels
	// (hpp's; the pods of one Deployment are listed by it).
	MounterSelector    = "hostpathprovisioner.kubevirt.io/mounter"
	PoolNameAnnotation = "hostpathprovisioner.kubevirt.io/pool"
	PoolPathAnnotation = "hostpathprovisioner.kubevirt.io/pool-path"
	NodeAnnotation     = "hostpathprovisioner.kubevirt.io/node"
	// DefaultOverlayClassName is upstream's backend StorageClass name for
	// a ReadWriteMany pool.
	DefaultOverlayClassName = "hpp-overlay"
	// MounterApp is the app label of mounter pods and cleanup Jobs.
	MounterApp = "hpp-pool"
)

const (
	mounterHealthPort = 8081
	fsSource          = "/source"   // a filesystem PVC in the mounter (upstream's path)
	blockSource       = "/dev/data" // a block PVC in the mounter (upstream's path)
	hostRoot          = "/host"
	// CleanupDeadlineSeconds bounds a cleanup Job: the finalizer waits for
	// the Jobs to finish, so a Job that can never run (its node gone
	// NotReady) must fail by itself.
	CleanupDeadlineSeconds = 300
)

// IsTemplatePool reports whether the pool is backed by PVCs.
func IsTemplatePool(p *hppv1.StoragePool) bool { return p.PVCTemplate != nil }

// IsSharedPool reports whether one ReadWriteMany PVC backs the pool on
// every node.
func IsSharedPool(p *hppv1.StoragePool) bool {
	if p.PVCTemplate == nil {
		return false
	}
	for _, m := range p.PVCTemplate.AccessModes {
		if m == corev1.ReadWriteMany {
			return true
		}
	}
	return false
}

func isBlock(p *hppv1.StoragePool) bool {
	vm := p.PVCTemplate.VolumeMode
	return vm != nil && *vm == corev1.PersistentVolumeBlock
}

// OverlayClassName is the backend StorageClass of a shared pool.
func OverlayClassName(p *hppv1.StoragePool) string {
	if p.OverlayClassName != "" {
		return p.OverlayClassName
	}
	return DefaultOverlayClassName
}

// ClaimFor is the PVC a node's mounter uses for the pool.
func ClaimFor(p *hppv1.StoragePool, node string) string {
	if IsSharedPool(p) {
		return PoolClaimName(p.Name, "")
	}
	return PoolClaimName(p.Name, node)
}

func (c *Config) poolLabels(pool string) map[string]string {
	l := c.labels(MounterApp)
	l[contract.PoolLabel] = PoolLabelValue(pool)
	return l
}

func poolAnnotations(p *hppv1.StoragePool, node string) map[string]string {
	return map[string]string{PoolNameAnnotation: p.Name, PoolPathAnnotation: p.Path, NodeAnnotation: node}
}

// PoolClaim is the pool's PVC for a node (node "" for the shared claim),
// made from the template as it is. It gets no owner reference: it holds
// the pool's data, so neither removing the pool nor deleting the CR
// deletes it (README: pool claims are kept).
func (c *Config) PoolClaim(p *hppv1.StoragePool, node string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: ClaimFor(p, node), Namespace: c.Namespace,
			Labels: c.poolLabels(p.Name), Annotations: map[string]string{PoolNameAnnotation: p.Name}},
		Spec: *p.PVCTemplate.DeepCopy(),
	}
}

// OverlayStorageClass is upstream's backend StorageClass for a shared
// pool. The reconciler only creates it, never updates it (as upstream).
func (c *Config) OverlayStorageClass(p *hppv1.StoragePool) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		TypeMeta:          metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:        metav1.ObjectMeta{Name: OverlayClassName(p), Labels: c.poolLabels(p.Name)},
		Provisioner:       contract.DriverName,
		Parameters:        map[string]string{contract.ParamStoragePool: p.Name, contract.ParamOverlayCSI: "true"},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// MounterDeployment runs hpp-mounter for the pool on one node
// (cmd/hpp-mounter/README.md is the contract). --keep-mount: a mounter
// that stops leaves the pool mounted, as upstream's mounter does, so a
// restart, an image roll, the takeover and its way back (upstream's
// mounter replacing hpp's) never unmount a pool; only the cleanup Job
// unmounts, once the pool has left the CR or the CR is gone. Recreate:
// one mounter pod per pool and node at a time (the next one finds the
// mount in place and keeps it).
func (c *Config) MounterDeployment(spec *hppv1.HostPathProvisionerSpec, p *hppv1.StoragePool, node string) *appsv1.Deployment {
	name := MounterName(p.Name, node)
	source := fsSource
	if isBlock(p) {
		source = blockSource
	}
	args := []string{
		"--storagePoolPath=" + source,
		"--mountPath=" + path.Join(p.Path, "csi"),
		"--hostPath=" + hostRoot,
		"--pool-name=" + p.Name,
		"--health-address=:" + strconv.Itoa(mounterHealthPort),
		"--keep-mount",
	}
	if p.EnforceSize {
		// prjquota on the XFS it mounts (cmd/hpp-mounter/README.md).
		args = append(args, "--enforce-size")
	}
	ctr := c.mounterContainer(args)
	ctr.Ports = []corev1.ContainerPort{{Name: "health", ContainerPort: mounterHealthPort, Protocol: corev1.ProtocolTCP}}
	ctr.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/readyz", Port: intstr.FromString("health")}}, PeriodSeconds: 5}
	ctr.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/healthz", Port: intstr.FromString("health")}}, PeriodSeconds: 30, TimeoutSeconds: 3, FailureThreshold: 5}
	data := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimFor(p, node)}}}
	if isBlock(p) {
		ctr.VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: blockSource}}
	} else {
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: fsSource})
	}
	pod := c.pinnedPodSpec(spec, node, ctr, data)
	pod.Tolerations = append(pod.Tolerations, nodePodTolerations...)
	selector := map[string]string{PoolSelectorLabel: p.Name}
	podLabels := c.poolLabels(p.Name)
	podLabels[MounterSelector] = name
	podLabels[PoolSelectorLabel] = p.Name
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.poolLabels(p.Name),
			Annotations: poolAnnotations(p, node)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: c.podAnnotations(CSISCCName)}, Spec: pod},
		},
	}
}

// CleanupJob unmounts the pool on a node after its mounter is gone. It is
// pinned to the node and tolerates NoSchedule taints: the node may have
// left the CR's placement (that is often why the pool goes), and the Job
// must still run exactly there.
func (c *Config) CleanupJob(spec *hppv1.HostPathProvisionerSpec, pool, poolPath, node string) *batchv1.Job {
	ctr := c.mounterContainer([]string{"unmount",
		"--mountPath=" + path.Join(poolPath, "csi"), "--hostPath=" + hostRoot})
	pod := c.pinnedPodSpec(spec, node, ctr)
	pod.NodeSelector = nil
	pod.Affinity = pinAffinity(node, nil)
	pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	pod.RestartPolicy = corev1.RestartPolicyOnFailure
	ann := map[string]string{PoolNameAnnotation: pool, PoolPathAnnotation: poolPath, NodeAnnotation: node}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: CleanupJobName(pool, node), Namespace: c.Namespace,
			Labels: c.poolLabels(pool), Annotations: ann},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](6),
			ActiveDeadlineSeconds: ptr.To[int64](CleanupDeadlineSeconds),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: c.poolLabels(pool),
				Annotations: c.podAnnotations(CSISCCName)}, Spec: pod},
		},
	}
}

func (c *Config) mounterContainer(args []string) corev1.Container {
	bidi := corev1.MountPropagationBidirectional
	return corev1.Container{
		Name:            "mounter",
		Image:           c.Images.Mounter,
		ImagePullPolicy: c.ImagePullPolicy,
		Args:            args,
		Env:             []corev1.EnvVar{nodeNameEnv},
		// mount(2) on the host and block devices need privilege.
		SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:             []corev1.VolumeMount{{Name: "host-root", MountPath: hostRoot, MountPropagation: &bidi}},
		Resources:                requests("10m", "20Mi"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// pinnedPodSpec is a node pod spec (workload placement, priority class,
// seccomp) pinned to one node by name. The mounter does not call the API
// server: no token is mounted. It runs as the CSI driver's ServiceAccount,
// which is what an OpenShift SCC grants privilege to.
func (c *Config) pinnedPodSpec(spec *hppv1.HostPathProvisionerSpec, node string, ctr corev1.Container, vols ...corev1.Volume) corev1.PodSpec {
	vols = append(vols, hostPathVolume("host-root", "/", corev1.HostPathDirectory))
	pod := c.nodePodSpec(spec, CSIServiceAccount, []corev1.Container{ctr}, vols)
	pod.AutomountServiceAccountToken = ptr.To(false)
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Affinity = pinAffinity(node, pod.Affinity)
	return pod
}

// nodePodTolerations keep a mounter where DaemonSet pods stay: on a
// cordoned node (a drain must not strand the pool's volumes), and on a node
// that is NotReady or unreachable for a while (evicting the mounter would
// only unmount the pool under running workloads once the node is back).
var nodePodTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
}

// pinAffinity requires the node by name (metadata.name, not the hostname
// label, which may differ) on top of the workload's node affinity: every
// term of the workload's required node selector gets the pin, since the
// terms are ORed.
func pinAffinity(node string, workload *corev1.Affinity) *corev1.Affinity {
	pin := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	a := workload.DeepCopy()
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		req = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchFields = append(req.NodeSelectorTerms[i].MatchFields, pin)
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	return a
}
