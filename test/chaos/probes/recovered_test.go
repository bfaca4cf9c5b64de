package probes

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

func recoveredStatus() hppv1.HostPathProvisionerStatus {
	return hppv1.HostPathProvisionerStatus{
		Conditions: []hppv1.Condition{
			{Type: hppv1.ConditionAvailable, Status: corev1.ConditionTrue},
			{Type: hppv1.ConditionProgressing, Status: corev1.ConditionFalse},
			{Type: hppv1.ConditionDegraded, Status: corev1.ConditionFalse},
		},
		StoragePoolStatuses: []hppv1.StoragePoolStatus{{
			Name: "block", Phase: hppv1.StoragePoolReady, DesiredReady: 1, CurrentReady: 1,
			Nodes: []hppv1.PoolNodeStatus{{Name: "n", Ready: true, ClaimPhase: corev1.ClaimBound, MounterReady: true}},
		}},
	}
}

// Each way the install can be short of whole is a violation that names it.
func TestCheckRecovered(t *testing.T) {
	if err := CheckRecovered(recoveredStatus()); err != nil {
		t.Fatalf("a whole install: %v", err)
	}
	for _, tt := range []struct {
		name  string
		spoil func(*hppv1.HostPathProvisionerStatus)
		want  string
	}{
		{"not Available", func(s *hppv1.HostPathProvisionerStatus) {
			s.Conditions[0] = hppv1.Condition{Type: hppv1.ConditionAvailable, Status: corev1.ConditionFalse, Reason: "Deploying", Message: "waiting"}
		}, "condition Available is False, want True (Deploying: waiting)"},
		{"Available missing", func(s *hppv1.HostPathProvisionerStatus) { s.Conditions = s.Conditions[1:] },
			"condition Available is Unknown, want True (the condition is missing)"},
		{"still Progressing", func(s *hppv1.HostPathProvisionerStatus) { s.Conditions[1].Status = corev1.ConditionTrue },
			"condition Progressing is True, want False"},
		{"Degraded", func(s *hppv1.HostPathProvisionerStatus) { s.Conditions[2].Status = corev1.ConditionTrue },
			"condition Degraded is True, want False"},
		{"a pool not ready", func(s *hppv1.HostPathProvisionerStatus) {
			s.StoragePoolStatuses[0].CurrentReady, s.StoragePoolStatuses[0].Phase = 0, "Preparing"
		}, "pool block is Preparing on 0 of 1 nodes"},
		{"a mounter not ready", func(s *hppv1.HostPathProvisionerStatus) {
			s.StoragePoolStatuses[0].Nodes[0].MounterReady = false
		}, "pool block on node n: ready true, mounter ready false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := recoveredStatus()
			tt.spoil(&st)
			err := CheckRecovered(st)
			var v *Violation
			if !errors.As(err, &v) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckRecovered = %v, want a violation saying %q", err, tt.want)
			}
		})
	}
}
