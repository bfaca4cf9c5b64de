package provisioner

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/util"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// verdict is what this node does with a claim.
type verdict int

const (
	// skip: not ours, another node's, or waiting for the scheduler.
	skip verdict = iota
	// provision: this node creates the volume.
	provision
	// adopt: a WaitForFirstConsumer claim pinned to this node by
	// kubevirt.io/provisionOnNode; the PV controller hands it to a
	// provisioner only once volume.kubernetes.io/selected-node is set, so
	// this node sets it to itself instead of waiting for a consumer.
	adopt
	// unplaceable: an Immediate claim that names no node; no node will
	// ever provision it and the user must be told.
	unplaceable
)

func (v verdict) String() string {
	return [...]string{"skip", "provision", "adopt", "unplaceable"}[v]
}

// decide is the node-selection rule, a pure function of the claim, its
// class and this node's name. Every node of the DaemonSet sees every claim
// (leader election is off), so exactly one of them must answer provision.
func decide(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, node string) (verdict, string) {
	switch {
	case claim.Spec.VolumeName != "":
		return skip, "claim is already bound"
	case claim.DeletionTimestamp != nil:
		return skip, "claim is being deleted"
	case class == nil || class.Provisioner != contract.LegacyProvisionerName:
		return skip, "claim's StorageClass is not served by " + contract.LegacyProvisionerName
	case populatorSource(claim):
		return skip, "claim is filled by a volume populator, which provisions its own claim"
	}
	wffc := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if target, ok := claim.Annotations[contract.AnnProvisionOnNode]; ok && target != "" {
		switch {
		case target != node:
			return skip, fmt.Sprintf("%s names node %q", contract.AnnProvisionOnNode, target)
		case wffc && claim.Annotations[contract.AnnSelectedNode] == "":
			return adopt, fmt.Sprintf("%s names this node and the class waits for a consumer", contract.AnnProvisionOnNode)
		}
		return provision, fmt.Sprintf("%s names this node", contract.AnnProvisionOnNode)
	}
	if wffc {
		switch selected := claim.Annotations[contract.AnnSelectedNode]; selected {
		case "":
			return skip, "waiting for the scheduler to select a node"
		case node:
			return provision, "the scheduler selected this node"
		default:
			return skip, fmt.Sprintf("the scheduler selected node %q", selected)
		}
	}
	return unplaceable, "Immediate binding and no " + contract.AnnProvisionOnNode
}

// populatorSource reports a claim whose data comes from a volume populator
// (dataSourceRef to anything but a claim or snapshot): the populator creates
// and provisions its own claim and rebinds the PV, so provisioning this one
// would hand the user an empty directory instead of their data.
func populatorSource(claim *v1.PersistentVolumeClaim) bool {
	ref := claim.Spec.DataSourceRef
	if ref == nil {
		return false
	}
	return !isCloneSource(ref.APIGroup, ref.Kind)
}

func isCloneSource(apiGroup *string, kind string) bool {
	group := ""
	if apiGroup != nil {
		group = *apiGroup
	}
	return (group == "" && kind == "PersistentVolumeClaim") ||
		(group == "snapshot.storage.k8s.io" && kind == "VolumeSnapshot")
}

// ShouldProvision is the library's Qualifier: it runs on every node for
// every claim event, before the library emits anything, so a false answer is
// silent. Claims this node must not serve are rejected here rather than in
// Provision, which the library would precede with a "Provisioning" event on
// every node.
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	className := util.GetPersistentVolumeClaimClass(claim)
	class, err := p.classes.Get(className)
	if err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("storage class lookup failed", zap.String("claim", claimKey(claim)), zap.String("class", className), zap.Error(err))
	}
	if err != nil {
		class = nil
	}
	v, why := decide(claim, class, p.node)
	p.log.Debug("claim qualified", zap.String("claim", claimKey(claim)), zap.Stringer("verdict", v), zap.String("reason", why))
	switch v {
	case provision:
		return true
	case adopt:
		p.selectThisNode(ctx, claim)
	case unplaceable:
		p.events.claim(ctx, claim, v1.EventTypeWarning, ReasonNoNode, unplaceableMessage(className))
	}
	return false
}

func unplaceableMessage(className string) string {
	return fmt.Sprintf("no node will provision this claim: StorageClass %q binds immediately and the claim has no %s annotation, so %s cannot tell which node's disk to use; "+
		"add the annotation %s: <node name> to the claim, or use a StorageClass with volumeBindingMode: WaitForFirstConsumer",
		className, contract.AnnProvisionOnNode, contract.LegacyProvisionerName, contract.AnnProvisionOnNode)
}

// selectThisNode sets the selected-node annotation on a copy of the claim.
// An Update (not a patch) carries the cached resourceVersion, so a scheduler
// that selected a node in the meantime wins with a conflict, never
// overwritten. Failures are retried by the next claim event or resync.
func (p *Provisioner) selectThisNode(ctx context.Context, cached *v1.PersistentVolumeClaim) {
	claim := cached.DeepCopy()
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[contract.AnnSelectedNode] = p.node
	_, err := p.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
	switch {
	case err == nil:
		p.log.Info("claim pinned to this node", zap.String("claim", claimKey(claim)), zap.String("node", p.node))
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		p.log.Debug("claim changed before it could be pinned; the next event retries", zap.String("claim", claimKey(claim)), zap.Error(err))
	default:
		p.log.Error("pinning claim to this node failed", zap.String("claim", claimKey(claim)), zap.Error(err))
	}
}

func claimKey(claim *v1.PersistentVolumeClaim) string {
	return claim.Namespace + "/" + claim.Name
}
