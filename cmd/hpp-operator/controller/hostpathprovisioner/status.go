package hostpathprovisioner

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

type condState struct {
	status          corev1.ConditionStatus
	reason, message string
}

// status is what one reconcile observed; writeStatus turns it into the CR's
// status and writes it only when it differs from what is there.
type status struct {
	version   string
	conds     map[hppv1.ConditionType]condState
	pools     []hppv1.StoragePoolStatus
	available bool
	poolState
	// specWarning: what hpp would refuse on a change (SpecWarning).
	specWarning string
}

// warnSpec records the spec's values that hpp runs (upstream's operator
// accepted them) but refuses in new CRs and changed fields.
func (s *status) warnSpec(errs field.ErrorList) {
	if len(errs) == 0 {
		return
	}
	s.specWarning = "runs as upstream's operator did, but a change of these fields must fix them (hpp refuses them in new CRs and changed fields): " +
		errs.ToAggregate().Error()
}

func newStatus(cr *hppv1.HostPathProvisioner, version string) *status {
	return &status{
		version: version,
		conds: map[hppv1.ConditionType]condState{
			hppv1.ConditionAvailable:   {corev1.ConditionFalse, "Deploying", "the node pods are not ready yet"},
			hppv1.ConditionProgressing: {corev1.ConditionTrue, "Deploying", "applying the desired state"},
			hppv1.ConditionDegraded:    {corev1.ConditionFalse, "AsExpected", ""},
		},
	}
}

func (s *status) degrade(reason, msg string) {
	s.conds[hppv1.ConditionDegraded] = condState{corev1.ConditionTrue, reason, msg}
}

func (s *status) progress(reason, msg string) {
	s.conds[hppv1.ConditionProgressing] = condState{corev1.ConditionTrue, reason, msg}
	s.conds[hppv1.ConditionAvailable] = condState{corev1.ConditionFalse, reason, msg}
}

func (s *status) progressing() bool {
	return s.conds[hppv1.ConditionProgressing].status == corev1.ConditionTrue
}

// fromDaemonSet: Available only when the DaemonSet controller has seen the
// current spec and every node it should run on has an updated, available
// pod.
func (s *status) fromDaemonSet(ds *appsv1.DaemonSet, pools []hppv1.StoragePool) {
	st := ds.Status
	current := st.ObservedGeneration >= ds.Generation
	want, ready, updated := st.DesiredNumberScheduled, st.NumberAvailable, st.UpdatedNumberScheduled
	switch {
	case current && want == 0:
		msg := fmt.Sprintf("DaemonSet %s runs on no node: no node matches spec.workload (nodeSelector, tolerations, affinity)", ds.Name)
		s.progress("NoNodes", msg)
		s.degrade("NoSchedulableNodes", msg)
	case current && ready == want && updated == want:
		s.available = true
		s.conds[hppv1.ConditionAvailable] = condState{corev1.ConditionTrue, "Ready", fmt.Sprintf("%d of %d node pods ready", ready, want)}
		s.conds[hppv1.ConditionProgressing] = condState{corev1.ConditionFalse, "Ready", ""}
	default:
		s.progress("Deploying", fmt.Sprintf("DaemonSet %s: %d of %d node pods ready, %d updated", ds.Name, ready, want, updated))
	}
	for _, p := range pools {
		phase := hppv1.StoragePoolPreparing
		if s.available {
			phase = hppv1.StoragePoolReady
		}
		s.pools = append(s.pools, hppv1.StoragePoolStatus{Name: p.Name, Phase: phase,
			DesiredReady: int(want), CurrentReady: int(ready)})
	}
}

// build returns the CR's new status. A condition keeps its
// lastTransitionTime unless its status changes, and no heartbeat is
// written, so an unchanged world gives an identical status.
func (s *status) build(cr *hppv1.HostPathProvisioner, now metav1.Time) hppv1.HostPathProvisionerStatus {
	out := hppv1.HostPathProvisionerStatus{
		OperatorVersion:     s.version,
		TargetVersion:       s.version,
		ObservedVersion:     cr.Status.ObservedVersion,
		StoragePoolStatuses: s.pools,
		// Written by the node-loss controller (package nodeloss), kept here.
		StrandedVolumes: cr.Status.StrandedVolumes,
	}
	if s.available {
		out.ObservedVersion = s.version
	}
	for _, t := range []hppv1.ConditionType{hppv1.ConditionAvailable, hppv1.ConditionProgressing, hppv1.ConditionDegraded} {
		c := s.conds[t]
		n := hppv1.Condition{Type: t, Status: c.status, Reason: c.reason, Message: c.message,
			ObservedGeneration: cr.Generation, LastTransitionTime: &now}
		if old := cr.Status.FindCondition(t); old != nil && old.Status == c.status && old.LastTransitionTime != nil {
			n.LastTransitionTime = old.LastTransitionTime
		}
		out.Conditions = append(out.Conditions, n)
	}
	if s.specWarning != "" {
		n := hppv1.Condition{Type: hppv1.ConditionSpecWarning, Status: corev1.ConditionTrue, Reason: "StricterRulesOnChange",
			Message: s.specWarning, ObservedGeneration: cr.Generation, LastTransitionTime: &now}
		if old := cr.Status.FindCondition(hppv1.ConditionSpecWarning); old != nil && old.Status == n.Status && old.LastTransitionTime != nil {
			n.LastTransitionTime = old.LastTransitionTime
		}
		out.Conditions = append(out.Conditions, n)
	}
	return out
}

// writeStatus writes the status if it changed, and records an event for
// each condition that changed status (transitions only).
func (r *Reconciler) writeStatus(ctx context.Context, cr *hppv1.HostPathProvisioner, s *status) error {
	next := s.build(cr, metav1.Now())
	r.setReady(s.available)
	if equality.Semantic.DeepEqual(cr.Status, next) {
		return nil
	}
	prev := cr.DeepCopy()
	cr.Status = next
	if err := r.Client.Status().Update(ctx, cr); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	for _, c := range next.Conditions {
		if old := prev.Status.FindCondition(c.Type); old == nil || old.Status != c.Status {
			typ := corev1.EventTypeNormal
			bad := c.Type == hppv1.ConditionDegraded || c.Type == hppv1.ConditionSpecWarning
			if bad == (c.Status == corev1.ConditionTrue) {
				typ = corev1.EventTypeWarning
			}
			if c.Type == hppv1.ConditionProgressing {
				typ = corev1.EventTypeNormal
			}
			r.Recorder.Eventf(cr, nil, typ, string(c.Type)+string(c.Status), reconcileAction, "%s", nonEmpty(c.Message, c.Reason))
		}
	}
	return nil
}

func nonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// poolState is what reconcilePools learnt for the status.
type poolState struct {
	// nodes: per pool, the nodes it should be mounted on.
	nodes map[string][]string
	// kept: per pool, nodes that left the placement but keep their mounter.
	kept map[string][]hppv1.PoolNodeStatus
}

func (s *poolState) keep(pool, node, reason string) {
	if s.kept == nil {
		s.kept = map[string][]hppv1.PoolNodeStatus{}
	}
	s.kept[pool] = append(s.kept[pool], hppv1.PoolNodeStatus{Name: node, Reason: reason})
}
