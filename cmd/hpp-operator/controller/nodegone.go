package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// NodeLossReconciler reports the volumes of nodes that went away and, for
// the opted-in ones, releases their claims and removes their orphaned PVs
// (nodegone_decide.go has the rules). It looks at the whole cluster at
// once: one request name, triggered by Node and PV changes and by its own
// timers.
type NodeLossReconciler struct {
	// Client reads Nodes, PVs, StorageClasses and CRs from the manager's
	// cache (all cached in full) and writes to the API server.
	Client client.Client
	// APIReader reads what the cache does not hold (claims and pods in
	// users' namespaces), only for volumes of lost nodes.
	APIReader client.Reader
	Recorder  EventRecorder
	Log       logr.Logger
	// ReleaseDelay is the delay of a "true" opt-in.
	ReleaseDelay time.Duration
	// NotReadyGrace: a node NotReady this long has its volumes reported.
	NotReadyGrace time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// stranded is the kubevirt_hpp_stranded_volumes gauge, registered by
	// SetupWithManager.
	stranded *prometheus.GaugeVec

	mu sync.Mutex
	// lost remembers, per node, when it was first seen gone and which of
	// its volumes were reported; seeded from the CR status after a
	// restart, so the delay does not start over.
	lost   map[string]*lostNode
	seeded bool
}

// lostNode is what the controller remembers of one lost node.
type lostNode struct {
	since    time.Time
	reported map[string]bool // PV names
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// volumeNode is the node an hpp volume lives on: the topology value of a
// CSI PV of the driver, the provisionOnNode annotation or hostname
// affinity of a legacy PV; "" for other PVs and shared volumes.
func volumeNode(pv *corev1.PersistentVolume) string {
	if nodes := pinnedNodes(pv); len(nodes) == 1 {
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

func (r *NodeLossReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
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
func (r *NodeLossReconciler) getClaim(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
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
func (r *NodeLossReconciler) claimPods(ctx context.Context, pvc *corev1.PersistentVolumeClaim) ([]corev1.Pod, error) {
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
