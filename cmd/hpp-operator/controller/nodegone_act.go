package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// provisionerFinalizer is csi-provisioner's (and the provisioner
// library's) finalizer on the PVs it made; it waits for a DeleteVolume that
// the lost node's provisioner will never make.
const provisionerFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"

// observedVolume is one volume whose node is not up, with its decision.
type observedVolume struct {
	pv       *corev1.PersistentVolume
	node     string
	state    nodeState
	since    time.Time
	claim    *corev1.PersistentVolumeClaim
	pods     []corev1.Pod
	optIn    optIn
	optInErr error
	decision decision
}

func (v *observedVolume) claimName() string {
	if v.claim != nil {
		return v.claim.Namespace + "/" + v.claim.Name
	}
	return ""
}

// world is what one reconcile saw.
type world struct {
	nodes   map[string]*corev1.Node
	volumes []*observedVolume
}

// observe lists the hpp volumes of nodes that are not up and decides what
// to do with each.
func (r *NodeLossReconciler) observe(ctx context.Context, now time.Time) (*world, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return nil, err
	}
	w := &world{nodes: map[string]*corev1.Node{}}
	byHostname := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		w.nodes[n.Name] = n
		if h := n.Labels[corev1.LabelHostname]; h != "" {
			byHostname[h] = n
		}
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := r.Client.List(ctx, pvs); err != nil {
		return nil, err
	}
	classes := &storagev1.StorageClassList{}
	if err := r.Client.List(ctx, classes); err != nil {
		return nil, err
	}
	byClass := map[string]*storagev1.StorageClass{}
	for i := range classes.Items {
		byClass[classes.Items[i].Name] = &classes.Items[i]
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		name := volumeNode(pv)
		if name == "" {
			continue
		}
		n := w.nodes[name]
		if n == nil {
			// A legacy PV names the node by its hostname label.
			n = byHostname[name]
		}
		v := &observedVolume{pv: pv, node: name}
		switch {
		case n == nil || !n.DeletionTimestamp.IsZero():
			v.state, v.since = nodeGone, r.lostSince(name, now)
		case !nodeReady(n):
			v.state, v.since = nodeNotReady, readySince(n, now)
		default:
			continue
		}
		if err := r.facts(ctx, v, byClass, w.nodes, now); err != nil {
			return nil, err
		}
		w.volumes = append(w.volumes, v)
	}
	return w, nil
}

// lostSince is when the node was first seen gone.
func (r *NodeLossReconciler) lostSince(node string, now time.Time) time.Time {
	if l := r.lost[node]; l != nil {
		return l.since
	}
	// Whole seconds: the status keeps no more.
	l := &lostNode{since: now.Truncate(time.Second), reported: map[string]bool{}}
	r.lost[node] = l
	return l.since
}

func readySince(n *corev1.Node, now time.Time) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return now
}

// facts reads the claim (and, for a claim due for release, its pods) and
// decides.
func (r *NodeLossReconciler) facts(ctx context.Context, v *observedVolume, classes map[string]*storagev1.StorageClass, nodes map[string]*corev1.Node, now time.Time) error {
	f := volumeFacts{node: v.state, since: v.since, retain: v.pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain}
	if d := decide(f, now, r.NotReadyGrace); !d.stranded {
		v.decision = d
		return nil
	}
	claim, err := r.getClaim(ctx, v.pv)
	if err != nil {
		return err
	}
	v.claim, f.claimGone = claim, claim == nil
	// The claim's setting wins over the one hpp copied onto the PV when
	// it released a claim, which wins over the class's.
	setting := classParam(classes, v.pv.Spec.StorageClassName, contract.AnnReleaseAfterNodeLoss)
	if s, ok := v.pv.Annotations[contract.AnnReleaseAfterNodeLoss]; ok {
		setting = s
	}
	if claim != nil {
		if s, ok := claim.Annotations[contract.AnnReleaseAfterNodeLoss]; ok {
			setting = s
		}
	}
	v.optIn, v.optInErr = parseOptIn(setting, r.ReleaseDelay)
	f.optIn = v.optIn
	v.decision = decide(f, now, r.NotReadyGrace)
	if !v.decision.release {
		return nil
	}
	if v.pods, err = r.claimPods(ctx, claim); err != nil {
		return err
	}
	for i := range v.pods {
		if running(&v.pods[i], nodes) {
			f.inUse = true
		}
	}
	v.decision = decide(f, now, r.NotReadyGrace)
	return nil
}

// act reports a newly stranded volume and carries out its decision.
func (r *NodeLossReconciler) act(ctx context.Context, v *observedVolume, now time.Time) error {
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
func (r *NodeLossReconciler) reportLost(v *observedVolume) {
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
func (r *NodeLossReconciler) release(ctx context.Context, v *observedVolume) error {
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

// removePV deletes the orphaned PV and takes away the provisioner's
// finalizer, which only the lost node's provisioner would have removed.
func (r *NodeLossReconciler) removePV(ctx context.Context, v *observedVolume) error {
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

func (r *NodeLossReconciler) event(regarding client.Object, typ, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, nil, typ, reason, action, "%s", note)
	}
}

// seed restores, once, what a previous run remembered: the CR status
// holds when each deleted node was first seen gone.
func (r *NodeLossReconciler) seed(ctx context.Context) error {
	if r.lost == nil {
		r.lost = map[string]*lostNode{}
	}
	if r.seeded {
		return nil
	}
	crs := &hppv1.HostPathProvisionerList{}
	if err := r.Client.List(ctx, crs); err != nil && !meta.IsNoMatchError(err) {
		return err
	}
	for _, cr := range crs.Items {
		for _, n := range cr.Status.StrandedVolumes {
			if n.Reason != hppv1.StrandedNodeDeleted || r.lost[n.Node] != nil {
				continue
			}
			l := &lostNode{since: n.Since.Time, reported: map[string]bool{}}
			for _, v := range n.Volumes {
				l.reported[v.PersistentVolume] = true
			}
			r.lost[n.Node] = l
		}
	}
	r.seeded = true
	return nil
}

// forgetReturned drops the nodes that are back (or hold no hpp volume any
// more), with an event on the CR for a node that came back.
func (r *NodeLossReconciler) forgetReturned(ctx context.Context, w *world) {
	still := map[string]bool{}
	for _, v := range w.volumes {
		if v.decision.stranded || v.state == nodeGone {
			still[v.node] = true
		}
	}
	var crs hppv1.HostPathProvisionerList
	for node, l := range r.lost {
		if still[node] {
			continue
		}
		delete(r.lost, node)
		n := w.nodes[node]
		if n == nil || len(l.reported) == 0 {
			continue
		}
		if crs.Items == nil {
			if err := r.Client.List(ctx, &crs); err != nil {
				r.Log.Error(err, "list HostPathProvisioners")
			}
		}
		for i := range crs.Items {
			r.event(&crs.Items[i], corev1.EventTypeNormal, "NodeBack", "Report", fmt.Sprintf(
				"node %s is back: its %d volume(s) are no longer stranded; nothing was released", node, len(l.reported)))
		}
		r.Log.Info("node back", "node", node, "volumes", len(l.reported))
	}
}

// metaTime is t in whole seconds, as the status stores it.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
