package nodeloss

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// act reports a newly stranded volume and carries out its decision.
func (r *Reconciler) act(ctx context.Context, v *observedVolume, now time.Time) error {
	d := v.decision
	if !d.stranded {
		return nil
	}
	l := r.lost[v.node]
	if l == nil {
		l = &lostNode{since: v.since, reported: map[string]bool{}}
		r.lost[v.node] = l
	}
	if !l.reported[v.pv.Name] {
		r.reportLost(v)
		l.reported[v.pv.Name] = true
	}
	switch {
	case d.release:
		return r.release(ctx, v)
	case d.removePV:
		return r.removePV(ctx, v)
	}
	return nil
}

// reportLost puts the event the issue asks for on the claim (on the PV
// when there is none).
func (r *Reconciler) reportLost(v *observedVolume) {
	var regarding client.Object = v.pv
	if v.claim != nil {
		regarding = v.claim
	}
	what := fmt.Sprintf("volume %s lives on node %s, which was removed at %s; its data is on that node's disk", v.pv.Name, v.node, v.since.UTC().Format(time.RFC3339))
	if v.state == nodeNotReady {
		what = fmt.Sprintf("volume %s lives on node %s, which has been NotReady since %s; its data is on that node's disk (hpp releases nothing while the Node exists)",
			v.pv.Name, v.node, v.since.UTC().Format(time.RFC3339))
	}
	var next string
	switch {
	case v.optInErr != nil:
		next = fmt.Sprintf("; kept: %v", v.optInErr)
	case v.state == nodeNotReady:
	case v.optIn.enabled:
		next = fmt.Sprintf("; opted in (%s=%s): hpp deletes the claim at %s unless the node comes back, so its StatefulSet makes a new one on a live node",
			contract.AnnReleaseAfterNodeLoss, v.optIn, v.decision.releaseAt.UTC().Format(time.RFC3339))
	default:
		next = fmt.Sprintf("; kept (annotate the claim %s=true to have hpp release it)", contract.AnnReleaseAfterNodeLoss)
	}
	r.event(regarding, corev1.EventTypeWarning, "NodeLost", "Report", what+next)
}

// release deletes the claim (hpp's opt-in copied onto the PV first, so
// the orphaned PV is known as opted in once the claim is gone), then the
// pods that wait for it and run nowhere, which would otherwise hold it
// (pvc-protection) until a new pod of its StatefulSet could not use it.
func (r *Reconciler) release(ctx context.Context, v *observedVolume) error {
	if v.pv.Annotations[contract.AnnReleaseAfterNodeLoss] == "" {
		patch := client.MergeFrom(v.pv.DeepCopy())
		if v.pv.Annotations == nil {
			v.pv.Annotations = map[string]string{}
		}
		v.pv.Annotations[contract.AnnReleaseAfterNodeLoss] = v.optIn.delay.String()
		if err := r.Client.Patch(ctx, v.pv, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("annotate PV %s: %w", v.pv.Name, err)
		}
	}
	if v.claim.DeletionTimestamp.IsZero() {
		err := r.Client.Delete(ctx, v.claim, client.Preconditions{UID: ptr.To(v.claim.UID)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete claim %s: %w", v.claimName(), err)
		}
		r.event(v.claim, corev1.EventTypeWarning, "Released", "Delete", fmt.Sprintf(
			"hpp deleted claim %s: its volume %s is on node %s, removed at %s; the data there is not moved. A StatefulSet makes a new claim, provisioned on a live node",
			v.claimName(), v.pv.Name, v.node, v.since.UTC().Format(time.RFC3339)))
		r.Log.Info("claim released", "claim", v.claimName(), "pv", v.pv.Name, "node", v.node)
	}
	var errs []error
	for i := range v.pods {
		p := &v.pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		// Immediately: no kubelet will confirm (pod GC does the same).
		err := r.Client.Delete(ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(p.UID)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete pod %s/%s waiting for claim %s: %w", p.Namespace, p.Name, v.claimName(), err))
		}
	}
	return errors.Join(errs...)
}

// provisionerFinalizer is csi-provisioner's (and the provisioner
// library's) finalizer on the PVs it made; it waits for a DeleteVolume that
// the lost node's provisioner will never make.
const provisionerFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"

// removePV deletes the orphaned PV and takes away the provisioner's
// finalizer, which only the lost node's provisioner would have removed.
func (r *Reconciler) removePV(ctx context.Context, v *observedVolume) error {
	pv := v.pv
	if pv.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, pv, client.Preconditions{UID: ptr.To(pv.UID)}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("delete PV %s: %w", pv.Name, err)
		}
		claim := "no claim"
		if ref := pv.Spec.ClaimRef; ref != nil {
			claim = "claim " + ref.Namespace + "/" + ref.Name
		}
		r.event(pv, corev1.EventTypeWarning, "VolumeLost", "Delete", fmt.Sprintf(
			"hpp removed PV %s (%s, pool %q, %s): its node %s was removed at %s and no provisioner is left to delete it; the data it held, on that node's disk, is lost to the cluster",
			pv.Name, claim, volumePool(pv), capacityOf(pv), v.node, v.since.UTC().Format(time.RFC3339)))
		r.Log.Info("orphaned PV removed", "pv", pv.Name, "node", v.node)
	}
	if !hasString(pv.Finalizers, provisionerFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(pv.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pv.Finalizers = removeString(pv.Finalizers, provisionerFinalizer)
	if err := r.Client.Patch(ctx, pv, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s of PV %s: %w", provisionerFinalizer, pv.Name, err)
	}
	return nil
}

func volumePool(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI != nil {
		return pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool]
	}
	return ""
}

func capacityOf(pv *corev1.PersistentVolume) string {
	q := pv.Spec.Capacity[corev1.ResourceStorage]
	return q.String()
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func removeString(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
