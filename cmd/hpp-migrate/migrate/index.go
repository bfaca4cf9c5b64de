package migrate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// index answers the questions assess asks of an inventory.
type index struct {
	claims        map[string]*corev1.PersistentVolumeClaim // by namespace/name
	pods          map[string][]string                      // claim namespace/name -> running pods
	nodes         map[string]*corev1.Node
	nodeByHost    map[string][]string // kubernetes.io/hostname label -> node names
	driverOnNodes map[string]bool
}

func newIndex(inv Inventory) *index {
	ix := &index{
		claims: map[string]*corev1.PersistentVolumeClaim{}, pods: map[string][]string{},
		nodes: map[string]*corev1.Node{}, nodeByHost: map[string][]string{}, driverOnNodes: map[string]bool{},
	}
	for i := range inv.Claims {
		c := &inv.Claims[i]
		ix.claims[c.Namespace+"/"+c.Name] = c
	}
	for i := range inv.Pods {
		p := &inv.Pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // finished pods hold no mount
		}
		for _, v := range p.Spec.Volumes {
			var claim string
			switch {
			case v.PersistentVolumeClaim != nil:
				claim = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				claim = p.Name + "-" + v.Name // the generic ephemeral volume's claim
			default:
				continue
			}
			key := p.Namespace + "/" + claim
			ix.pods[key] = append(ix.pods[key], p.Namespace+"/"+p.Name)
		}
	}
	for i := range inv.Nodes {
		n := &inv.Nodes[i]
		ix.nodes[n.Name] = n
		if h, ok := n.Labels[corev1.LabelHostname]; ok {
			ix.nodeByHost[h] = append(ix.nodeByHost[h], n.Name)
		}
	}
	for _, cn := range inv.CSINodes {
		for _, d := range cn.Spec.Drivers {
			if d.Name == contract.DriverName {
				ix.driverOnNodes[cn.Name] = true
			}
		}
	}
	return ix
}

// node finds the node a legacy PV's directory is on: the owner annotation
// both legacy provisioners write, else the node whose hostname label the
// PV's node affinity names (the label is not always the node name).
func (ix *index) node(pv *corev1.PersistentVolume) (string, error) {
	if n := pv.Annotations[contract.AnnProvisionOnNode]; n != "" {
		if ix.nodes[n] == nil {
			return "", fmt.Errorf("unknown node: annotation %s names node %q, which does not exist", contract.AnnProvisionOnNode, n)
		}
		return n, nil
	}
	var hosts []string
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for _, t := range na.Required.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn {
					hosts = append(hosts, e.Values...)
				}
			}
		}
	}
	if len(hosts) != 1 {
		return "", fmt.Errorf("unknown node: no %s annotation and the node affinity names %d hostnames %q (want exactly one)", contract.AnnProvisionOnNode, len(hosts), hosts)
	}
	names := ix.nodeByHost[hosts[0]]
	if len(names) != 1 {
		if ix.nodes[hosts[0]] != nil {
			return hosts[0], nil
		}
		return "", fmt.Errorf("unknown node: %d nodes have label %s=%s", len(names), corev1.LabelHostname, hosts[0])
	}
	return names[0], nil
}

// assess builds the item of one legacy PV. orig is the legacy PV as it was
// before any change (live or backup); live is the PV in the cluster now
// (nil when gone).
func (ix *index) assess(orig, live *corev1.PersistentVolume, plan *Plan, cfg Config) *Item {
	it := &Item{PV: orig.Name, Directory: orig.Spec.HostPath.Path, StorageClass: orig.Spec.StorageClassName, Original: orig, Live: live, State: StateReady}
	if q, ok := orig.Spec.Capacity[corev1.ResourceStorage]; ok {
		it.Size = q.String()
	}
	interrupted := live == nil || live.UID != orig.UID || live.DeletionTimestamp != nil || slices.Contains(live.Finalizers, contract.FinalizerMigration)
	var reasons []string
	if interrupted && orig == live {
		// Changed by an earlier run (Retain, finalizer, parked claimRef)
		// whose backup is elsewhere: only that backup has the original.
		return blockedNoBackup(it, live)
	}
	ref := orig.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		reasons = append(reasons, "not bound to a claim (Available): there is no claim to keep; delete it or leave it to hpp-legacy")
	} else {
		it.Claim, it.ClaimUID = ref.Namespace+"/"+ref.Name, string(ref.UID)
		it.Pods = ix.pods[it.Claim]
		if live != nil && !interrupted && (live.Status.Phase == corev1.VolumeReleased || live.Status.Phase == corev1.VolumeFailed) {
			reasons = append(reasons, fmt.Sprintf("%s: its claim %s is gone; the reclaim policy %s applies, not a migration", live.Status.Phase, it.Claim, live.Spec.PersistentVolumeReclaimPolicy))
		} else if r := ix.claimProblem(orig, interrupted); r != "" {
			reasons = append(reasons, r)
		}
		if len(it.Pods) > 0 && !cfg.AllowInUse && !interrupted {
			reasons = append(reasons, fmt.Sprintf("in use by running pods %s: stop them, or pass --allow-in-use", strings.Join(it.Pods, ", ")))
		}
	}
	dir, prefixed, err := LegacyDir(orig, plan.PVDir)
	if err != nil {
		reasons = append(reasons, err.Error())
	}
	it.VolumeHandle, it.NamingPrefix = dir, prefixed
	node, err := ix.node(orig)
	if err != nil {
		reasons = append(reasons, err.Error())
	} else {
		it.Node = node
		if !ix.driverOnNodes[node] {
			reasons = append(reasons, fmt.Sprintf("hpp-csi is not running on node %s (its CSINode has no driver %s): install it first, or pods could not mount the volume", node, contract.DriverName))
		}
	}
	if m := orig.Spec.VolumeMode; m != nil && *m == corev1.PersistentVolumeBlock {
		reasons = append(reasons, "spec.volumeMode: Block: hostpath volumes are directories")
	}
	if len(reasons) == 0 {
		want, err := Translate(orig, Target{Node: node, Pool: plan.Pool, Dir: dir})
		if err != nil {
			reasons = append(reasons, err.Error())
		}
		it.Want = want
	}
	switch {
	case len(reasons) > 0 && interrupted:
		it.State = StateBlocked
		reasons = append(reasons, "an earlier run stopped half-way (backup present): fix the above and rerun migrate, or run rollback")
	case len(reasons) > 0:
		it.State = StateBlocked
	case interrupted:
		it.State = StateInterrupted
	}
	it.Reasons = reasons
	return it
}

// claimProblem returns why the claim cannot follow the PV, or "". An
// interrupted run may have left the claim Lost (the PV was briefly gone);
// that heals once the new PV exists, so only identity is checked then.
func (ix *index) claimProblem(orig *corev1.PersistentVolume, interrupted bool) string {
	ref := orig.Spec.ClaimRef
	key := ref.Namespace + "/" + ref.Name
	c := ix.claims[key]
	switch {
	case c == nil:
		return fmt.Sprintf("claim missing: %s does not exist", key)
	case c.UID != ref.UID:
		return fmt.Sprintf("claim missing: %s has uid %s, the PV was bound to uid %s", key, c.UID, ref.UID)
	case c.Spec.VolumeName != orig.Name:
		return fmt.Sprintf("claim %s names volume %q, not %s", key, c.Spec.VolumeName, orig.Name)
	case c.DeletionTimestamp != nil:
		return fmt.Sprintf("claim %s is being deleted", key)
	case c.Status.Phase != corev1.ClaimBound && !interrupted:
		return fmt.Sprintf("claim %s is %s, not Bound", key, c.Status.Phase)
	}
	return ""
}

// CounterpartName is the name of the CSI StorageClass made for a legacy one.
func CounterpartName(legacy string) string { return legacy + "-csi" }

// counterparts lists every legacy StorageClass with the CSI class it needs.
// StorageClass parameters are immutable, so an existing class of that name
// that differs is reported, never edited.
func counterparts(classes []storagev1.StorageClass, pool string) []ClassItem {
	byName := map[string]*storagev1.StorageClass{}
	for i := range classes {
		byName[classes[i].Name] = &classes[i]
	}
	var out []ClassItem
	for i := range classes {
		sc := &classes[i]
		if sc.Provisioner != contract.LegacyProvisionerName {
			continue
		}
		want := Counterpart(sc, pool)
		item := ClassItem{Legacy: sc.Name, CSI: want.Name, State: "Create", Object: want}
		if have := byName[want.Name]; have != nil {
			switch {
			case have.Provisioner != contract.DriverName:
				item.State, item.Reason = "Conflict", fmt.Sprintf("StorageClass %s exists with provisioner %s", have.Name, have.Provisioner)
			case have.Parameters[contract.ParamStoragePool] != pool:
				item.State, item.Reason = "Conflict", fmt.Sprintf("StorageClass %s exists with "+contract.ParamStoragePool+" %q, not %q", have.Name, have.Parameters[contract.ParamStoragePool], pool)
			default:
				item.State = "Exists"
			}
		}
		out = append(out, item)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Legacy < out[j].Legacy })
	return out
}

// Counterpart is the CSI StorageClass for new claims that used to go to the
// legacy class: same reclaim policy, the pool, and WaitForFirstConsumer
// (the only binding hpp-csi supports). It is never the default class: two
// defaults would make claims without a class fail.
func Counterpart(legacy *storagev1.StorageClass, pool string) *storagev1.StorageClass {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{
		Provisioner:       contract.DriverName,
		Parameters:        map[string]string{contract.ParamStoragePool: pool},
		ReclaimPolicy:     legacy.ReclaimPolicy,
		VolumeBindingMode: &wffc,
	}
	sc.APIVersion, sc.Kind = "storage.k8s.io/v1", "StorageClass"
	sc.Name = CounterpartName(legacy.Name)
	sc.Labels = copyMap(legacy.Labels)
	sc.Annotations = map[string]string{contract.AnnCounterpartOf: legacy.Name}
	return sc
}

func blockedNoBackup(it *Item, live *corev1.PersistentVolume) *Item {
	if ref := live.Spec.ClaimRef; ref != nil {
		it.Claim, it.ClaimUID = ref.Namespace+"/"+ref.Name, string(ref.UID)
	}
	it.State = StateBlocked
	it.Reasons = []string{"an earlier run changed this PV (finalizer " + contract.FinalizerMigration + ") but --backup-dir has no backup of it: pass the --backup-dir of that run"}
	return it
}
