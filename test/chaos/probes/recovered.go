package probes

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// CheckRecovered fails unless the HostPathProvisioner's status says the
// install is whole again: Available, neither Progressing nor Degraded,
// and every pool Ready on every node it should be, with its mounter ready
// where it has one (a pvcTemplate pool).
func CheckRecovered(st hppv1.HostPathProvisionerStatus) error {
	want := map[hppv1.ConditionType]corev1.ConditionStatus{
		hppv1.ConditionAvailable:   corev1.ConditionTrue,
		hppv1.ConditionProgressing: corev1.ConditionFalse,
		hppv1.ConditionDegraded:    corev1.ConditionFalse,
	}
	for _, typ := range []hppv1.ConditionType{hppv1.ConditionAvailable, hppv1.ConditionProgressing, hppv1.ConditionDegraded} {
		got := corev1.ConditionUnknown
		msg := "the condition is missing"
		for _, c := range st.Conditions {
			if c.Type == typ {
				got, msg = c.Status, c.Reason+": "+c.Message
			}
		}
		if got != want[typ] {
			return &Violation{fmt.Sprintf("condition %s is %s, want %s (%s)", typ, got, want[typ], msg)}
		}
	}
	for _, p := range st.StoragePoolStatuses {
		if p.Phase != hppv1.StoragePoolReady || p.CurrentReady != p.DesiredReady {
			return &Violation{fmt.Sprintf("pool %s is %s on %d of %d nodes", p.Name, p.Phase, p.CurrentReady, p.DesiredReady)}
		}
		for _, n := range p.Nodes {
			if !n.Ready || (n.ClaimPhase != "" && !n.MounterReady) {
				return &Violation{fmt.Sprintf("pool %s on node %s: ready %v, mounter ready %v (%s)", p.Name, n.Name, n.Ready, n.MounterReady, n.Reason)}
			}
		}
	}
	return nil
}
