package hostpathprovisioner

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

func readyDS(want, ready int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Generation: 2},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: want, NumberAvailable: ready, UpdatedNumberScheduled: ready}}
}

// A condition keeps its transition time until its status changes, and no
// heartbeat is written: an unchanged world gives an identical status.
func TestStatusKeepsTransitionTimes(t *testing.T) {
	cr := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	st := newStatus(cr, "v1.1.0")
	st.fromDaemonSet(readyDS(2, 1), nil)
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	got := st.build(cr, t0)
	if got.ObservedVersion != "" || findCond(got, hppv1.ConditionAvailable).Status != corev1.ConditionFalse {
		t.Fatalf("not ready yet: %+v", got)
	}
	cr.Status = got
	st = newStatus(cr, "v1.1.0")
	st.fromDaemonSet(readyDS(2, 2), nil)
	t1 := metav1.NewTime(t0.Add(time.Hour))
	again := st.build(cr, t1)
	for _, c := range again.Conditions {
		want := t0
		if c.Type != hppv1.ConditionDegraded {
			want = t1 // Available and Progressing changed status
		}
		if !c.LastTransitionTime.Equal(&want) {
			t.Errorf("%s: transition time %v, want %v", c.Type, c.LastTransitionTime, want)
		}
		if c.LastHeartbeatTime != nil {
			t.Errorf("%s: heartbeat written", c.Type)
		}
	}
	if again.ObservedVersion != "v1.1.0" {
		t.Errorf("observedVersion %q once available, want v1.1.0", again.ObservedVersion)
	}
}

func TestNoNodesIsDegradedWithTheReason(t *testing.T) {
	cr := &hppv1.HostPathProvisioner{}
	st := newStatus(cr, "v1")
	st.fromDaemonSet(readyDS(0, 0), []hppv1.StoragePool{{Name: "a"}})
	got := st.build(cr, metav1.Now())
	deg := findCond(got, hppv1.ConditionDegraded)
	if deg.Reason != "NoSchedulableNodes" || deg.Message != "DaemonSet ds runs on no node: no node matches spec.workload (nodeSelector, tolerations, affinity)" {
		t.Errorf("%+v", deg)
	}
	if got.StoragePoolStatuses[0].Phase != hppv1.StoragePoolPreparing {
		t.Errorf("pool phase %s", got.StoragePoolStatuses[0].Phase)
	}
}

func findCond(st hppv1.HostPathProvisionerStatus, typ hppv1.ConditionType) hppv1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return hppv1.Condition{}
}
