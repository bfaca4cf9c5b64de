package hostpathprovisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// Nodes are cluster-scoped and envtest's API server is shared by the
// package's tests: each test removes the nodes it made.
func addNode(t *testing.T, h *harness, name string, labels map[string]string, taints ...corev1.Taint) {
	t.Helper()
	createNode(t, h.admin, name, labels, taints...)
}

// createNode is addNode before the harness exists (a test's setup).
func createNode(t *testing.T, admin client.Client, name string, labels map[string]string, taints ...corev1.Taint) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := admin.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), n) })
	// The API server's admission taints a new node not-ready; play the
	// node controller once kubelet reports Ready (envtest runs neither).
	n.Spec.Taints = taints
	if err := admin.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// setNodeLabels replaces node name's labels: how a test moves a node in or
// out of the CR's placement.
func (h *harness) setNodeLabels(name string, labels map[string]string) {
	h.t.Helper()
	n := &corev1.Node{}
	if err := h.get(client.ObjectKey{Name: name}, n); err != nil {
		h.t.Fatal(err)
	}
	n.Labels = labels
	if err := h.admin.Update(h.ctx, n); err != nil {
		h.t.Fatal(err)
	}
}

func template(mode corev1.PersistentVolumeMode, access corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaimSpec {
	return &corev1.PersistentVolumeClaimSpec{
		VolumeMode:       ptr.To(mode),
		StorageClassName: ptr.To("backing"),
		AccessModes:      []corev1.PersistentVolumeAccessMode{access},
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}
}

func (h *harness) mounter(pool, node string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: render.MounterName(pool, node)}, d)
	if apierrors.IsNotFound(err) {
		// Say why, if the operator knows.
		if c, cerr := h.cond("hpp", hppv1.ConditionDegraded); cerr == nil && c.Status == corev1.ConditionTrue {
			return d, fmt.Errorf("%w (Degraded: %s)", err, c.Message)
		}
	}
	return d, err
}

func (h *harness) waitGone(what string, obj client.Object) {
	h.t.Helper()
	eventually(h.t, what+" deleted", func() error {
		err := h.get(client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s still there", what)
		}
		return err
	})
}

// playMounterReady plays the Deployment controller and the PV controller
// (envtest runs neither): the pool claim is Bound and the mounter ready.
func (h *harness) playMounterReady(pool, node string) {
	h.t.Helper()
	eventually(h.t, "mounter "+pool+"/"+node+" ready", func() error {
		d, err := h.mounter(pool, node)
		if err != nil {
			return err
		}
		if err := h.tryBindClaim(d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, ReadyReplicas: 1,
			AvailableReplicas: 1, UpdatedReplicas: 1}
		return h.admin.Status().Update(h.ctx, d)
	})
}

// playMounterPodFailing plays the ReplicaSet controller and kubelet: a pod
// of the mounter Deployment whose container is stuck waiting with reason
// and message. Deleted when the test ends.
func (h *harness) playMounterPodFailing(pool, node, reason, message string) {
	h.t.Helper()
	d, err := h.mounter(pool, node)
	if err != nil {
		h.t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-play", Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	h.create(pod)
	h.t.Cleanup(func() { _ = h.admin.Delete(context.WithoutCancel(h.ctx), pod, client.GracePeriodSeconds(0)) })
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "mounter", Image: d.Spec.Template.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
	}}}
	if err := h.admin.Status().Update(h.ctx, pod); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) bindClaim(name string) {
	h.t.Helper()
	eventually(h.t, "claim "+name+" bound", func() error { return h.tryBindClaim(name) })
}

func (h *harness) tryBindClaim(name string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: name}, pvc); err != nil {
		return err
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	pvc.Status.Phase = corev1.ClaimBound
	return h.admin.Status().Update(h.ctx, pvc)
}

// finishJob plays the Job controller: the Job succeeded or failed.
func (h *harness) finishJob(name string, ok bool) {
	h.t.Helper()
	eventually(h.t, "job "+name+" finished", func() error {
		j := &batchv1.Job{}
		if err := h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: name}, j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime = &now
		if ok {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "DeadlineExceeded"},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "DeadlineExceeded"}}
		}
		return h.admin.Status().Update(h.ctx, j)
	})
}

func (h *harness) poolStatus(cr, pool string) (*hppv1.StoragePoolStatus, error) {
	cur := &hppv1.HostPathProvisioner{}
	if err := h.get(client.ObjectKey{Name: cr}, cur); err != nil {
		return nil, err
	}
	for i := range cur.Status.StoragePoolStatuses {
		if cur.Status.StoragePoolStatuses[i].Name == pool {
			return &cur.Status.StoragePoolStatuses[i], nil
		}
	}
	return nil, fmt.Errorf("no status for pool %s: %+v", pool, cur.Status.StoragePoolStatuses)
}

func (h *harness) waitEvent(reason, contains string) {
	h.t.Helper()
	eventually(h.t, reason+" event", func() error {
		evs := &eventsv1.EventList{}
		if err := h.admin.List(h.ctx, evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Note, contains) {
				return nil
			}
		}
		return fmt.Errorf("no %s event containing %q among %d events", reason, contains, len(evs.Items))
	})
}

func (h *harness) updateCR(name string, f func(*hppv1.HostPathProvisioner)) {
	h.t.Helper()
	eventually(h.t, "update CR", func() error {
		cur := &hppv1.HostPathProvisioner{}
		if err := h.get(client.ObjectKey{Name: name}, cur); err != nil {
			return err
		}
		f(cur)
		return h.admin.Update(h.ctx, cur)
	})
}

func pvDir(ds *appsv1.DaemonSet) string {
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "PV_DIR" {
			return e.Value
		}
	}
	return ""
}

func deployment(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func (h *harness) csiDaemonSet() *appsv1.DaemonSet {
	h.t.Helper()
	ds := &appsv1.DaemonSet{}
	eventually(h.t, "CSI DaemonSet", func() error {
		return h.get(client.ObjectKey{Namespace: h.cfg.Namespace, Name: render.CSIDaemonSetName}, ds)
	})
	return ds
}
