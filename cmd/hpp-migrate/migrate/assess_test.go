package migrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// inventory is a cluster with node-a (hostname label host-a, hpp-csi
// running) and the given PVs, claims and pods.
func inventory(pvs []*corev1.PersistentVolume, claims []*corev1.PersistentVolumeClaim, pods ...corev1.Pod) Inventory {
	inv := Inventory{
		Nodes:    []corev1.Node{node("node-a", "host-a"), node("node-b", "host-b")},
		CSINodes: []storagev1.CSINode{csiNode("node-a")},
		Pods:     pods,
	}
	for _, pv := range pvs {
		inv.PVs = append(inv.PVs, *pv)
	}
	for _, c := range claims {
		inv.Claims = append(inv.Claims, *c)
	}
	return inv
}

func reasonsOf(t *testing.T, plan *Plan) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, it := range plan.Items {
		out[it.PV] = it.Reasons
		if (it.State == StateBlocked) != (len(it.Reasons) > 0) {
			t.Errorf("PV %s: state %s with reasons %q", it.PV, it.State, it.Reasons)
		}
	}
	return out
}

func TestAssessReasons(t *testing.T) {
	ok := legacyPV("ok", "c-ok", false)
	prefixed := legacyPV("prefixed", "c-prefixed", true)
	noOwner := legacyPV("no-owner", "c-no-owner", false)
	delete(noOwner.Annotations, contract.AnnProvisionOnNode) // found through the hostname label
	unknownNode := legacyPV("unknown-node", "c-unknown-node", false)
	unknownNode.Annotations[contract.AnnProvisionOnNode] = "gone"
	noDriver := legacyPV("no-driver", "c-no-driver", false)
	noDriver.Annotations[contract.AnnProvisionOnNode] = "node-b"
	outside := legacyPV("outside", "c-outside", false)
	outside.Spec.HostPath.Path = "/elsewhere/outside"
	missing := legacyPV("claim-missing", "c-gone", false)
	recreated := legacyPV("recreated", "c-recreated", false)
	released := legacyPV("released", "c-released", false)
	released.Status.Phase = corev1.VolumeReleased
	available := legacyPV("available", "x", false)
	available.Spec.ClaimRef = nil
	inUse := legacyPV("in-use", "c-in-use", false)
	pending := legacyPV("pending", "c-pending", false)
	block := legacyPV("block", "c-block", false)
	bm := corev1.PersistentVolumeBlock
	block.Spec.VolumeMode = &bm
	handMade := legacyPV("hand-made", "c-hand", false)
	handMade.Annotations = nil // a hostPath PV nobody provisioned: not ours

	recreatedClaim := boundClaim("c-recreated", "recreated")
	recreatedClaim.UID = "other"
	pendingClaim := boundClaim("c-pending", "pending")
	pendingClaim.Status.Phase = corev1.ClaimPending
	inv := inventory(
		[]*corev1.PersistentVolume{ok, prefixed, noOwner, unknownNode, noDriver, outside, missing, recreated, released, available, inUse, pending, block, handMade},
		[]*corev1.PersistentVolumeClaim{boundClaim("c-ok", "ok"), boundClaim("c-prefixed", "prefixed"), boundClaim("c-no-owner", "no-owner"),
			boundClaim("c-unknown-node", "unknown-node"), boundClaim("c-no-driver", "no-driver"), boundClaim("c-outside", "outside"),
			recreatedClaim, boundClaim("c-in-use", "in-use"), pendingClaim, boundClaim("c-block", "block")},
		podUsing("vm", "c-in-use", corev1.PodRunning), podUsing("done", "c-ok", corev1.PodSucceeded),
	)
	plan, err := Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"ok":            nil,
		"prefixed":      nil,
		"no-owner":      nil,
		"unknown-node":  {`unknown node: annotation ` + contract.AnnProvisionOnNode + ` names node "gone", which does not exist`},
		"no-driver":     {"hpp-csi is not running on node node-b (its CSINode has no driver " + contract.DriverName + "): install it first, or pods could not mount the volume"},
		"outside":       {`spec.hostPath.path "/elsewhere/outside": outside PV_DIR /var/hpvolumes (not a direct child)`},
		"claim-missing": {"claim missing: ns/c-gone does not exist"},
		"recreated":     {"claim missing: ns/c-recreated has uid other, the PV was bound to uid uid-c-recreated"},
		"released":      {"Released: its claim ns/c-released is gone; the reclaim policy Delete applies, not a migration"},
		"available":     {"not bound to a claim (Available): there is no claim to keep; delete it or leave it to hpp-legacy"},
		"in-use":        {"in use by running pods ns/vm: stop them, or pass --allow-in-use"},
		"pending":       {"claim ns/c-pending is Pending, not Bound"},
		"block":         {"spec.volumeMode: Block: hostpath volumes are directories"},
	}
	if diff := cmp.Diff(want, reasonsOf(t, plan)); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	for _, it := range plan.Items {
		if it.PV == "prefixed" && (it.VolumeHandle != "c-prefixed-prefixed" || !it.NamingPrefix || it.Want.Spec.CSI.VolumeHandle != "c-prefixed-prefixed") {
			t.Errorf("prefixed item: %+v", it)
		}
		if it.PV == "no-owner" && it.Node != "node-a" {
			t.Errorf("no-owner: node %q, want node-a (from the hostname label)", it.Node)
		}
	}

	plan, err = Assess(inv, Config{PVDir: testPVDir, Pool: "legacy", AllowInUse: true, Select: Selection{Names: []string{"in-use"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 1 || plan.Items[0].State != StateReady || cmp.Diff([]string{"ns/vm"}, plan.Items[0].Pods) != "" {
		t.Errorf("--allow-in-use: %+v", plan.Items)
	}
}

func TestAssessInferPVDir(t *testing.T) {
	a := legacyPV("a", "ca", false)
	b := legacyPV("b", "cb", false)
	b.Spec.HostPath.Path = "/other/b"
	_, err := Assess(inventory([]*corev1.PersistentVolume{a, b}, nil), Config{Pool: "legacy"})
	if err == nil || err.Error() != "--pv-dir: legacy PVs are in 2 directories (/other, /var/hpvolumes): pass the legacy provisioner's PV_DIR" {
		t.Errorf("error %v", err)
	}
	plan, err := Assess(inventory([]*corev1.PersistentVolume{a}, []*corev1.PersistentVolumeClaim{boundClaim("ca", "a")}), Config{Pool: "legacy"})
	if err != nil || plan.PVDir != testPVDir || plan.Items[0].State != StateReady {
		t.Errorf("inferred plan %+v, %v", plan, err)
	}
}

func TestAssessResumeStates(t *testing.T) {
	orig := legacyPV("pv", "c", false)
	claim := boundClaim("c", "pv")
	backups := map[string]*corev1.PersistentVolume{"pv": orig}

	// Killed between release and create: only the backup is left.
	inv := inventory(nil, []*corev1.PersistentVolumeClaim{claim})
	inv.Backups = backups
	plan, err := Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if err != nil || len(plan.Items) != 1 || plan.Items[0].State != StateInterrupted || plan.Items[0].Want == nil {
		t.Fatalf("absent PV with backup: %+v %v", plan, err)
	}

	// Held (Retain + finalizer): interrupted, and the backup's policy wins.
	held := orig.DeepCopy()
	held.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	held.Finalizers = append(held.Finalizers, contract.FinalizerMigration)
	inv = inventory([]*corev1.PersistentVolume{held}, []*corev1.PersistentVolumeClaim{claim})
	inv.Backups = backups
	plan, _ = Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if it := plan.Items[0]; it.State != StateInterrupted || it.Want.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("held PV: %+v", it)
	}

	// Held by a run whose backup is not in this --backup-dir: blocked, as
	// only that backup has the original reclaim policy.
	inv = inventory([]*corev1.PersistentVolume{held}, []*corev1.PersistentVolumeClaim{claim})
	plan, _ = Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if it := plan.Items[0]; it.State != StateBlocked || it.Want != nil ||
		cmp.Diff([]string{"an earlier run changed this PV (finalizer " + contract.FinalizerMigration + ") but --backup-dir has no backup of it: pass the --backup-dir of that run"}, it.Reasons) != "" {
		t.Errorf("held PV without backup: %+v", it)
	}

	// Created, policy not yet restored: interrupted. Restored and Bound: migrated.
	csi, _ := Translate(orig, Target{Node: "node-a", Pool: "legacy", Dir: "pv"})
	csi.UID = "new"
	csi.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	inv = inventory([]*corev1.PersistentVolume{csi}, []*corev1.PersistentVolumeClaim{claim})
	inv.Backups = backups
	plan, _ = Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if plan.Items[0].State != StateInterrupted {
		t.Errorf("created CSI PV with Retain: %+v", plan.Items[0])
	}
	csi.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	csi.Status.Phase = corev1.VolumeBound
	inv = inventory([]*corev1.PersistentVolume{csi}, []*corev1.PersistentVolumeClaim{claim})
	inv.Backups = backups
	plan, _ = Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if it := plan.Items[0]; it.State != StateMigrated || it.Node != "node-a" || it.Claim != "ns/c" {
		t.Errorf("finished: %+v", it)
	}
}

func TestCounterparts(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	classes := []storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "hostpath"}, Provisioner: contract.LegacyProvisionerName, ReclaimPolicy: &retain},
		{ObjectMeta: metav1.ObjectMeta{Name: "taken"}, Provisioner: contract.LegacyProvisionerName},
		{ObjectMeta: metav1.ObjectMeta{Name: "taken-csi"}, Provisioner: "other.example.com"},
		{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Provisioner: contract.LegacyProvisionerName},
		{ObjectMeta: metav1.ObjectMeta{Name: "done-csi"}, Provisioner: contract.DriverName, Parameters: map[string]string{contract.ParamStoragePool: "legacy"}},
	}
	got := counterparts(classes, "legacy")
	states := map[string]string{}
	for _, c := range got {
		states[c.Legacy] = c.State + " " + c.Reason
	}
	want := map[string]string{"hostpath": "Create ", "taken": "Conflict StorageClass taken-csi exists with provisioner other.example.com", "done": "Exists "}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	sc := got[1].Object // hostpath
	if sc.Name != "hostpath-csi" || sc.Provisioner != contract.DriverName || sc.Parameters[contract.ParamStoragePool] != "legacy" ||
		*sc.ReclaimPolicy != retain || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("counterpart %+v", sc)
	}
}

func TestAssessSelection(t *testing.T) {
	a := legacyPV("a", "ca", false)
	b := legacyPV("b", "cb", false)
	b.Annotations[contract.AnnProvisionOnNode] = "node-b"
	cb := boundClaim("cb", "b")
	cb.Namespace = "other"
	b.Spec.ClaimRef.Namespace = "other"
	inv := inventory([]*corev1.PersistentVolume{a, b}, []*corev1.PersistentVolumeClaim{boundClaim("ca", "a"), cb})
	for _, tc := range []struct {
		sel  Selection
		want []string
	}{
		{Selection{}, []string{"a", "b"}},
		{Selection{Names: []string{"b"}}, []string{"b"}},
		{Selection{Namespace: "ns"}, []string{"a"}},
		{Selection{Node: "node-b"}, []string{"b"}},
		{Selection{Namespace: "ns", Node: "node-b"}, nil},
	} {
		plan, err := Assess(inv, Config{PVDir: testPVDir, Pool: "legacy", Select: tc.sel})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range plan.Items {
			got = append(got, it.PV)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.sel, diff)
		}
	}
}
