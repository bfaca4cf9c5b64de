package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// The StatefulSet of the workload: each replica a writer on the claim its
// volumeClaimTemplate gives it, so a replica deleted by the churn comes
// back on the same claim (as a database's pod does after a node drain) and
// its writer goes on appending to the same file.
const (
	statefulSet     = "chaos-sts"
	statefulSetSize = 2
	// firstSetWriter is the writer number of replica 0; the plain writers
	// are numbered from 1.
	firstSetWriter = 10
)

// setUpStatefulSet creates the StatefulSet and adds its replicas to the
// writers once they run.
func (r *run) setUpStatefulSet(ctx context.Context) {
	t, c := r.t, r.env.C.Client
	labels := map[string]string{"app": statefulSet}
	claim := kit.PVC(ns, "data", className(kit.PoolLocal), "64Mi")
	pod := kit.OnNode(kit.Pod(ns, "", fmt.Sprintf("exec /chaos/writer --path /data/records --writer $((%d + ${HOSTNAME##*-})) --every 100ms", firstSetWriter),
		kit.PodVolume{Name: "data", Claim: "data", Path: "/data"},
		kit.PodVolume{Name: "bin", Path: "/chaos", ReadOnly: true, Source: &corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: r.binDir}}}),
		r.env.C.RealNode().Name)
	// The template's claim comes from volumeClaimTemplates, not a volume.
	pod.Spec.Volumes = pod.Spec.Volumes[1:]
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: statefulSet},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To[int32](statefulSetSize),
			ServiceName:          statefulSet,
			Selector:             &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claim.Spec}},
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range statefulSetSize {
		name := fmt.Sprintf("%s-%d", statefulSet, i)
		if _, err := kit.WaitPodPhase(ctx, c, ns, name, corev1.PodRunning, 3*time.Minute); err != nil {
			t.Fatalf("StatefulSet replica %s: %v\n%s", name, err, kit.Events(ctx, c, ns, "Pod", name))
		}
		w := &writer{id: uint32(firstSetWriter + i), claim: "data-" + name, pod: name, pool: kit.PoolLocal}
		pv, err := r.boundPV(ctx, w.claim)
		if err != nil {
			t.Fatal(err)
		}
		w.file = filepath.Join(r.poolPaths[w.pool], "csi", pv.Spec.CSI.VolumeHandle, "records")
		r.writers = append(r.writers, w)
	}
}

// replaceReplica deletes one StatefulSet replica, as a drain or an
// eviction does, and waits until its successor runs on the same claim.
func (r *run) replaceReplica(ctx context.Context, i int) error {
	c := r.env.C.Client
	name := fmt.Sprintf("%s-%d", statefulSet, i%statefulSetSize)
	old, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("replica %s: %w", name, err)
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete replica %s: %w", name, err)
	}
	return kit.Poll(ctx, r.bindDeadline(time.Now()), "replica "+name+" replaced and running", func(ctx context.Context) (bool, string, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		return p.UID != old.UID && p.Status.Phase == corev1.PodRunning, "phase " + string(p.Status.Phase), nil
	})
}
