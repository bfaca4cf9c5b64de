package hostpathprovisioner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// phaseRank orders phases so a pool's phase is that of its least advanced node.
var phaseRank = map[hppv1.StoragePoolPhase]int{hppv1.StoragePoolPreparing: 0, hppv1.StoragePoolMounting: 1, hppv1.StoragePoolReady: 2}

// observePools fills in the status of every pvcTemplate pool from the
// cache: per node its claim's phase and whether the mounter is ready. The
// CR is Available only when every such pool is Ready on every node.
func (r *Reconciler) observePools(ctx context.Context, cr *hppv1.HostPathProvisioner, st *status) error {
	var notReady []string
	pods, err := r.csiPodNodes(ctx)
	if err != nil {
		return err
	}
	for i := range st.pools {
		ps := &st.pools[i]
		p := findPool(cr.Spec.StoragePools, ps.Name)
		if p == nil {
			continue
		}
		if !render.IsTemplatePool(p) {
			ps.Nodes = withHeld(dirPoolNodes(pods), st.kept[p.Name])
			continue
		}
		nodes := st.nodes[p.Name]
		ps.Phase, ps.CurrentReady, ps.DesiredReady, ps.Nodes = hppv1.StoragePoolReady, 0, len(nodes), nil
		if len(nodes) == 0 {
			ps.Phase = hppv1.StoragePoolPreparing
		}
		for _, node := range nodes {
			ns, err := r.poolOnNode(ctx, p, node)
			if err != nil {
				return err
			}
			if ns.Ready {
				ps.CurrentReady++
			}
			if phaseRank[ns.Phase] < phaseRank[ps.Phase] {
				ps.Phase = ns.Phase
			}
			ps.Nodes = append(ps.Nodes, ns)
		}
		ps.Nodes = append(ps.Nodes, st.kept[p.Name]...)
		claims, err := r.claimStatuses(ctx, p.Name)
		if err != nil {
			return err
		}
		ps.ClaimStatuses = claims
		if ps.Phase != hppv1.StoragePoolReady {
			notReady = append(notReady, fmt.Sprintf("%s (%s, %d of %d nodes)", p.Name, ps.Phase, ps.CurrentReady, ps.DesiredReady))
		}
	}
	if len(notReady) > 0 && st.available {
		st.available = false
		st.progress("PoolsNotReady", "storage pools not mounted on every node yet: "+strings.Join(notReady, ", "))
	}
	return nil
}

// poolOnNode is the pool's state on one node.
func (r *Reconciler) poolOnNode(ctx context.Context, p *hppv1.StoragePool, node string) (hppv1.PoolNodeStatus, error) {
	ns := hppv1.PoolNodeStatus{Name: node, Claim: render.ClaimFor(p, node), Phase: hppv1.StoragePoolPreparing}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: ns.Claim}, pvc)
	if err != nil && !apierrors.IsNotFound(err) {
		return ns, err
	}
	ns.ClaimPhase = pvc.Status.Phase
	dep := &appsv1.Deployment{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: render.MounterName(p.Name, node)}, dep)
	if err != nil && !apierrors.IsNotFound(err) {
		return ns, err
	}
	ns.MounterReady = err == nil && dep.Status.ObservedGeneration >= dep.Generation && dep.Status.ReadyReplicas > 0
	switch {
	case ns.ClaimPhase != corev1.ClaimBound && !ns.MounterReady:
		// A WaitForFirstConsumer claim binds once the mounter pod is
		// scheduled, so Pending here is normal for a while.
		ns.Reason = fmt.Sprintf("claim %s is %s", ns.Claim, nonEmpty(string(ns.ClaimPhase), "not created yet"))
	case !ns.MounterReady:
		ns.Phase = hppv1.StoragePoolMounting
		ns.Reason = fmt.Sprintf("mounter Deployment %s is not ready (pool not mounted and marked yet)", dep.Name)
		problem, err := r.mounterPodProblems(ctx, dep.Name)
		if err != nil {
			return ns, err
		}
		if problem != "" {
			ns.Reason += ": " + problem
		}
	default:
		ns.Phase, ns.Ready = hppv1.StoragePoolReady, true
	}
	return ns, nil
}

// mounterPodProblems says why the mounter Deployment's pods are not ready,
// as the scheduler and kubelet report it: a pod that cannot be scheduled,
// a container the runtime cannot create or whose image cannot be pulled,
// a mounter that exited (its termination message is its log's last lines,
// hpp-mounter's refusal). On the real node a mounter whose host mount could
// not be made (`/` not a shared mount) only said "not ready" before, and
// the reason was in the pod's events alone.
func (r *Reconciler) mounterPodProblems(ctx context.Context, deployment string) (string, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.Config.Namespace),
		client.MatchingLabels{render.MounterSelector: deployment}); err != nil {
		return "", fmt.Errorf("list mounter pods: %w", err)
	}
	var out []string
	for i := range pods.Items {
		if problem := podProblem(&pods.Items[i]); problem != "" {
			out = append(out, "pod "+pods.Items[i].Name+": "+problem)
		}
	}
	// The cache lists in no fixed order (see claimStatuses).
	slices.Sort(out)
	return strings.Join(out, "; "), nil
}

// podProblem is what holds a pod back, or "" while it is merely starting
// or running.
func podProblem(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return "not scheduled: " + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return strings.TrimSuffix(fmt.Sprintf("container %s %s: %s", cs.Name, w.Reason, w.Message), ": ")
		}
		if last := cs.LastTerminationState.Terminated; last != nil && !cs.Ready {
			return strings.TrimSuffix(fmt.Sprintf("container %s exited with code %d (%s), restarted %d times: %s",
				cs.Name, last.ExitCode, last.Reason, cs.RestartCount, strings.TrimSpace(last.Message)), ": ")
		}
	}
	return ""
}

// claimStatuses is upstream's per-claim status of a pool.
func (r *Reconciler) claimStatuses(ctx context.Context, pool string) ([]hppv1.ClaimStatus, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Config.Namespace),
		client.MatchingLabels{contract.PoolLabel: render.PoolLabelValue(pool)}); err != nil {
		return nil, err
	}
	out := make([]hppv1.ClaimStatus, 0, len(list.Items))
	for _, c := range list.Items {
		out = append(out, hppv1.ClaimStatus{Name: c.Name, Status: c.Status})
	}
	// The cache lists in no fixed order; an unchanged world must give an
	// identical status, or every reconcile would write it.
	slices.SortFunc(out, func(a, b hppv1.ClaimStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func findPool(pools []hppv1.StoragePool, name string) *hppv1.StoragePool {
	for i := range pools {
		if pools[i].Name == name {
			return &pools[i]
		}
	}
	return nil
}
