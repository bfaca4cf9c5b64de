package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/test/chaos/records"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// writer is a pod appending records to its claim (test/chaos/writer);
// acked is the highest record number its log acknowledged so far.
type writer struct {
	id    uint32
	claim string
	// pod is the writer's pod, when not named as its claim (a
	// StatefulSet's replica).
	pod   string
	pool  string
	file  string // on the host, once the claim is bound
	acked uint64
}

func className(pool string) string { return "chaos-" + pool }

// setUp creates the namespace, a StorageClass per pool and the writers,
// and records the pool mounts.
func (r *run) setUp(ctx context.Context) {
	t, c := r.t, r.env.C.Client
	if err := r.env.C.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, pool := range []string{kit.PoolLocal, kit.PoolShared, poolFull} {
		sc := kit.StorageClass(className(pool), pool, func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = ptr.To(true) })
		if _, err := c.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Two writers on the directory pool, one on the pool that gets full,
	// two on the shared pool.
	for i, pool := range []string{kit.PoolLocal, kit.PoolLocal, poolFull, kit.PoolShared, kit.PoolShared} {
		w := &writer{id: uint32(i + 1), claim: fmt.Sprintf("writer-%d", i+1), pool: pool}
		if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, w.claim, className(pool), "64Mi"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := kit.Pod(ns, w.claim, fmt.Sprintf("exec /chaos/writer --path /data/records --writer %d --every 100ms", w.id),
			kit.PodVolume{Name: "data", Claim: w.claim, Path: "/data"},
			kit.PodVolume{Name: "bin", Path: "/chaos", ReadOnly: true, Source: &corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: r.binDir}}})
		// Back after any crash; the acks are read from the log as it goes.
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		if _, err := c.CoreV1().Pods(ns).Create(ctx, kit.OnNode(pod, r.env.C.RealNode().Name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.writers = append(r.writers, w)
	}
	for _, w := range r.writers {
		if _, err := kit.WaitPodPhase(ctx, c, ns, w.podName(), corev1.PodRunning, 3*time.Minute); err != nil {
			t.Fatalf("writer %d: %v\n%s", w.id, err, kit.Events(ctx, c, ns, "Pod", w.claim))
		}
		pv, err := r.boundPV(ctx, w.claim)
		if err != nil {
			t.Fatal(err)
		}
		w.file = filepath.Join(r.poolPaths[w.pool], "csi", pv.Spec.CSI.VolumeHandle, "records")
	}
	mountPaths := []string{r.poolPaths[poolFull]}
	ids, err := mountIDs(mountPaths)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(mountPaths) {
		t.Fatalf("pool mounts %v: found only %v", mountPaths, ids)
	}
	r.mountIDs = ids
}

func (r *run) boundPV(ctx context.Context, claim string) (*corev1.PersistentVolume, error) {
	pvc, err := kit.WaitPVCBound(ctx, r.env.C.Client, ns, claim, 3*time.Minute)
	if err != nil {
		return nil, err
	}
	return r.env.C.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
}

// podName is the name of w's pod.
func (w *writer) podName() string {
	if w.pod != "" {
		return w.pod
	}
	return w.claim
}

// readAcks raises each writer's acked from the tail of its pod's log.
func (r *run) readAcks(ctx context.Context) {
	for _, w := range r.writers {
		lines := int64(40)
		b, err := r.env.C.Client.CoreV1().Pods(ns).GetLogs(w.podName(), &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
		if err != nil {
			continue // the API server or kubelet may be down: next poll
		}
		w.acked = max(w.acked, records.HighestAck(b))
	}
}

// checkWriters verifies every writer's file against what its log
// acknowledged (read first, so the file can only hold more).
func (r *run) checkWriters(ctx context.Context) {
	r.readAcks(ctx)
	for _, w := range r.writers {
		_, err := records.VerifyFile(w.file, w.id, w.acked)
		var v *records.Violation
		switch {
		case errors.Is(err, os.ErrNotExist):
			r.violation("writer %d: its records file %s: %v", w.id, w.file, err)
		case errors.As(err, &v):
			r.violation("writer %d on pool %s: %v", w.id, w.pool, err)
		case err != nil:
			r.t.Logf("writer %d: reading %s: %v", w.id, w.file, err)
		}
	}
}

// churnFor runs claim operations one after another for length, the
// create-to-Bound latency of each new claim appended to lat.
func (r *run) churnFor(ctx context.Context, length time.Duration, lat *[]time.Duration) {
	end := time.Now().Add(length)
	for i := 0; time.Now().Before(end); i++ {
		var err error
		op := []string{"create", "clone", "create", "snapshot+restore", "expand", "replace replica"}[i%6]
		switch op {
		case "create":
			err = r.claimRoundTrip(ctx, kit.PoolLocal, nil, lat)
		case "clone":
			err = r.claimRoundTrip(ctx, kit.PoolLocal, &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: r.writers[0].claim}, lat)
		case "snapshot+restore":
			err = r.snapshotRoundTrip(ctx, lat)
		case "expand":
			err = r.expand(ctx)
		case "replace replica":
			err = r.replaceReplica(ctx, i/6)
		}
		r.count(op, err)
		if err != nil {
			r.note("%s failed: %v", op, err)
		}
	}
}

var claimSeq int

// claimRoundTrip creates a claim (from source when set) and a pod using
// it, waits until it is Bound and the pod runs, then deletes both and
// remembers the volume for the end's leak check.
func (r *run) claimRoundTrip(ctx context.Context, pool string, source *corev1.TypedObjectReference, lat *[]time.Duration) error {
	c := r.env.C.Client
	claimSeq++
	name := fmt.Sprintf("churn-%d", claimSeq)
	pvc := kit.PVC(ns, name, className(pool), "64Mi")
	pvc.Spec.DataSourceRef = source
	created := time.Now()
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s: %w", name, err)
	}
	defer r.deleteClaim(ctx, name, pool)
	pod := kit.OnNode(kit.Pod(ns, name, "sleep 3600", kit.PodVolume{Name: "v", Claim: name, Path: "/v"}), r.env.C.RealNode().Name)
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	defer func() {
		_ = c.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	if _, err := kit.WaitPVCBound(ctx, c, ns, name, r.bindDeadline(created)); err != nil {
		r.violation("claim %s not Bound within 2 minutes of the last fault: %v\n%s", name, err, kit.Events(ctx, c, ns, "PersistentVolumeClaim", name))
		return err
	}
	r.mu.Lock()
	*lat = append(*lat, time.Since(created))
	r.mu.Unlock()
	if _, err := kit.WaitPodPhase(ctx, c, ns, name, corev1.PodRunning, r.bindDeadline(created)); err != nil {
		return fmt.Errorf("pod %s: %w", name, err)
	}
	return nil
}

// bindDeadline is how long a claim created at created may take to bind:
// until 2 minutes after the last fault, and never less than 2 minutes.
func (r *run) bindDeadline(created time.Time) time.Duration {
	if r.faultsStart.IsZero() {
		return settleAfterFaults
	}
	return max(time.Until(r.lastFaultEnd().Add(settleAfterFaults)), time.Until(created.Add(settleAfterFaults)))
}

// deleteClaim deletes a churn claim and remembers its volume.
func (r *run) deleteClaim(ctx context.Context, name, pool string) {
	c := r.env.C.Client
	ctx = context.WithoutCancel(ctx)
	if pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && pvc.Spec.VolumeName != "" {
		if pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{}); err == nil && pv.Spec.CSI != nil {
			r.mu.Lock()
			r.deleted = append(r.deleted, deletedVolume{claim: name, handle: pv.Spec.CSI.VolumeHandle, pool: pool})
			r.mu.Unlock()
		}
	}
	_ = c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.note("delete claim %s: %v", name, err)
	}
}

// snapshotRoundTrip snapshots the first writer's claim, restores it into
// a new claim used by a pod, then deletes the claim and the snapshot.
func (r *run) snapshotRoundTrip(ctx context.Context, lat *[]time.Duration) error {
	dyn, err := dynamic.NewForConfig(r.env.C.RESTConfig)
	if err != nil {
		return err
	}
	claimSeq++
	name := fmt.Sprintf("snap-%d", claimSeq)
	snap := kit.VolumeSnapshot(ns, name, r.writers[0].claim)
	if _, err := dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Create(ctx, snap, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create snapshot %s: %w", name, err)
	}
	defer func() {
		_ = dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	}()
	err = kit.Poll(ctx, r.bindDeadline(time.Now()), "snapshot "+name+" ready", func(ctx context.Context) (bool, string, error) {
		u, err := dyn.Resource(kit.VolumeSnapshots).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		ready, _, _ := unstructured.NestedBool(u.Object, "status", "readyToUse")
		return ready, fmt.Sprint(u.Object["status"]), nil
	})
	if err != nil {
		return err
	}
	apiGroup := "snapshot.storage.k8s.io"
	return r.claimRoundTrip(ctx, kit.PoolLocal, &corev1.TypedObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: name}, lat)
}

// expand grows the second writer's claim by 16 Mi and waits until the
// claim's status shows it (kubelet expands online).
func (r *run) expand(ctx context.Context) error {
	c := r.env.C.Client
	w := r.writers[1]
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, w.claim, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	want.Add(resource.MustParse("16Mi"))
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("expand %s: %w", w.claim, err)
	}
	return kit.Poll(ctx, r.bindDeadline(time.Now()), "claim "+w.claim+" expanded to "+want.String(), func(ctx context.Context) (bool, string, error) {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, w.claim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		got := pvc.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(want) >= 0, "capacity " + got.String(), nil
	})
}
