package nodeloss

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/driverpv"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// world is what one reconcile saw.
type world struct {
	nodes   map[string]*corev1.Node
	volumes []*observedVolume
}

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

// observe lists the hpp volumes of nodes that are not up and decides what
// to do with each.
func (r *Reconciler) observe(ctx context.Context, now time.Time) (*world, error) {
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

// volumeNode is the node an hpp volume lives on: the topology value of a
// CSI PV of the driver, the provisionOnNode annotation or hostname
// affinity of a legacy PV; "" for other PVs and shared volumes.
func volumeNode(pv *corev1.PersistentVolume) string {
	if nodes := driverpv.PinnedNodes(pv); len(nodes) == 1 {
		return nodes[0]
	}
	if pv.Spec.HostPath == nil || pv.Annotations[contract.AnnProvisionedBy] != contract.LegacyProvisionerName {
		return ""
	}
	if n := pv.Annotations[contract.AnnProvisionOnNode]; n != "" {
		return n
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == corev1.LabelHostname && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
func (r *Reconciler) facts(ctx context.Context, v *observedVolume, classes map[string]*storagev1.StorageClass, nodes map[string]*corev1.Node, now time.Time) error {
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

// classParam returns a StorageClass parameter, "" when the class is gone.
func classParam(classes map[string]*storagev1.StorageClass, name, key string) string {
	if sc := classes[name]; sc != nil {
		return sc.Parameters[key]
	}
	return ""
}

// getClaim reads a PV's claim from the API server; nil when it is gone or
// is another claim of the same name.
func (r *Reconciler) getClaim(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return nil, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pvc)
	if apierrors.IsNotFound(err) || (err == nil && ref.UID != "" && pvc.UID != ref.UID) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get claim %s/%s of PV %s: %w", ref.Namespace, ref.Name, pv.Name, err)
	}
	return pvc, nil
}

// claimPods lists the pods of the claim's namespace that use it.
func (r *Reconciler) claimPods(ctx context.Context, pvc *corev1.PersistentVolumeClaim) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(pvc.Namespace)); err != nil {
		return nil, fmt.Errorf("list pods of namespace %s: %w", pvc.Namespace, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
				out = append(out, p)
				break
			}
		}
	}
	return out, nil
}

// running says whether a pod may be running: scheduled to a node that
// exists, and not finished. A pod bound to the lost node, or not
// scheduled, runs nowhere.
func running(p *corev1.Pod, nodes map[string]*corev1.Node) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	n := nodes[p.Spec.NodeName]
	return p.Spec.NodeName != "" && n != nil && n.DeletionTimestamp.IsZero()
}
