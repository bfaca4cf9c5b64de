package hostpathprovisioner_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// A Block pvcTemplate pool: a PVC and a pinned mounter per node the CSI
// driver runs on (placement and taints as the DaemonSet controller sees
// them), long names hashed, status per node, Available only once mounted
// everywhere; then nodes leave (cleanup Job), are deleted, and join.
func TestTemplatePoolMountersFollowNodes(t *testing.T) {
	h := start(t, "hpp-pools-nodes")
	ns := h.cfg.Namespace
	long := "node-" + strings.Repeat("x", 70) + ".example.com"
	sel := map[string]string{"hpp": "yes"}
	addNode(t, h, "node-a", sel)
	addNode(t, h, "node-b", sel)
	addNode(t, h, long, sel)
	addNode(t, h, "node-tainted", sel, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
	addNode(t, h, "node-other", nil)
	addNode(t, h, "node-cordoned", sel, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})

	cr := poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"},
		hppv1.StoragePool{Name: "block", Path: "/var/hpp-block", PVCTemplate: template(corev1.PersistentVolumeBlock, corev1.ReadWriteOnce)})
	cr.Spec.Workload = hppv1.NodePlacement{NodeSelector: sel,
		Tolerations: []corev1.Toleration{{Key: "storage", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	h.create(cr)
	nodes := []string{"node-a", "node-b", "node-cordoned", long}
	for _, n := range nodes {
		eventually(t, "mounter and claim on "+n, func() error {
			if _, err := h.mounter("block", n); err != nil {
				return err
			}
			return h.get(client.ObjectKey{Namespace: ns, Name: render.PoolClaimName("block", n)}, &corev1.PersistentVolumeClaim{})
		})
	}
	for _, n := range []string{"node-tainted", "node-other"} {
		if _, err := h.mounter("block", n); !apierrors.IsNotFound(err) {
			t.Errorf("mounter on %s, where the CSI driver does not run: %v", n, err)
		}
	}
	if _, err := h.mounter("local", "node-a"); !apierrors.IsNotFound(err) {
		t.Errorf("mounter for a directory pool: %v", err)
	}

	// Names: upstream's, hashed to 63 characters when long (literal
	// facts in render/names_test.go).
	if got := render.MounterName("block", "node-a"); got != "hpp-pool-block-node-a" {
		t.Errorf("mounter name %s", got)
	}
	longName := render.MounterName("block", long)
	if len(longName) != len("hpp-pool-12345678") || !strings.HasPrefix(longName, "hpp-pool-") || longName == render.MounterName("block", long+"2") {
		t.Errorf("long mounter name %q (%d characters)", longName, len(longName))
	}
	if got := render.CleanupJobName("block", long); len(got) > 63 || !strings.HasPrefix(got, "cleanup-pool-") {
		t.Errorf("long cleanup Job name %q", got)
	}

	// The mounter Deployment.
	d, err := h.mounter("block", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(d, cr) && (len(d.OwnerReferences) == 0 || d.OwnerReferences[0].Name != "hpp") {
		t.Errorf("mounter not owned by the CR: %v", d.OwnerReferences)
	}
	pod := d.Spec.Template.Spec
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" || terms[0].MatchFields[0].Values[0] != "node-a" {
		t.Errorf("mounter not pinned to node-a by name: %+v", terms)
	}
	if pod.NodeSelector["hpp"] != "yes" || !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Key == "storage" }) ||
		!slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Key == corev1.TaintNodeUnschedulable }) ||
		!slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
			return t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds == nil
		}) {
		t.Errorf("workload placement not applied to the mounter: nodeSelector %v tolerations %v", pod.NodeSelector, pod.Tolerations)
	}
	c := pod.Containers[0]
	for _, want := range []string{"--storagePoolPath=/dev/data", "--mountPath=/var/hpp-block/csi", "--hostPath=/host", "--pool-name=block", "--keep-mount"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("mounter args %v lack %s", c.Args, want)
		}
	}
	if len(c.VolumeDevices) != 1 || c.VolumeDevices[0].DevicePath != "/dev/data" || len(c.VolumeMounts) != 1 ||
		c.VolumeMounts[0].MountPath != "/host" || *c.VolumeMounts[0].MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("mounter devices %+v mounts %+v", c.VolumeDevices, c.VolumeMounts)
	}
	if c.ImagePullPolicy != corev1.PullNever || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || !*c.SecurityContext.Privileged {
		t.Errorf("mounter container %+v", c)
	}
	if v := pod.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "hpp-pool-block-node-a" {
		t.Errorf("mounter volume %+v", v)
	}
	if d.Spec.Strategy.Type != "Recreate" || *pod.AutomountServiceAccountToken {
		t.Errorf("strategy %s automount %v", d.Spec.Strategy.Type, *pod.AutomountServiceAccountToken)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: "hpp-pool-block-node-a"}, pvc); err != nil {
		t.Fatal(err)
	}
	if *pvc.Spec.VolumeMode != corev1.PersistentVolumeBlock || *pvc.Spec.StorageClassName != "backing" || len(pvc.OwnerReferences) != 0 ||
		pvc.Labels[contract.PoolLabel] != "block-hpp" {
		t.Errorf("pool claim: owners %v labels %v spec %+v", pvc.OwnerReferences, pvc.Labels, pvc.Spec)
	}
	ds := h.csiDaemonSet()
	if want := `{"name":"block","path":"/block-data-dir/csi","mounted":true}`; !strings.Contains(pvDir(ds), want) {
		t.Errorf("PV_DIR %s lacks %s", pvDir(ds), want)
	}

	// Status: the DaemonSet alone does not make the CR Available.
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, int32(len(nodes)))
	eventually(t, "pool Preparing, CR not Available", func() error {
		ps, err := h.poolStatus("hpp", "block")
		if err != nil {
			return err
		}
		c, err := h.cond("hpp", hppv1.ConditionAvailable)
		if err != nil {
			return err
		}
		if ps.Phase != hppv1.StoragePoolPreparing || len(ps.Nodes) != len(nodes) || ps.DesiredReady != len(nodes) ||
			c.Status != corev1.ConditionFalse || c.Reason != "PoolsNotReady" {
			return fmt.Errorf("pool %+v, Available %+v", ps, c)
		}
		return nil
	})
	// Bound but not mounted yet: Mounting on that node.
	h.bindClaim("hpp-pool-block-node-a")
	eventually(t, "node-a Mounting", func() error {
		ps, err := h.poolStatus("hpp", "block")
		if err != nil {
			return err
		}
		for _, n := range ps.Nodes {
			if n.Name == "node-a" && n.Phase == hppv1.StoragePoolMounting && n.ClaimPhase == corev1.ClaimBound && !n.MounterReady &&
				n.Reason == "mounter Deployment hpp-pool-block-node-a is not ready (pool not mounted and marked yet)" {
				return nil
			}
		}
		return fmt.Errorf("nodes %+v", ps.Nodes)
	})
	// The mounter pod's problem is in the node's reason (found on the real
	// node: a runtime refusing the host mount).
	h.playMounterPodFailing("block", "node-a", "CreateContainerError",
		`failed to generate container "c1" spec: path "/" is mounted on "/" but it is not a shared mount`)
	eventually(t, "node-a's reason names the mounter pod's problem", func() error {
		ps, err := h.poolStatus("hpp", "block")
		if err != nil {
			return err
		}
		want := `mounter Deployment hpp-pool-block-node-a is not ready (pool not mounted and marked yet): pod hpp-pool-block-node-a-play: ` +
			`container mounter CreateContainerError: failed to generate container "c1" spec: path "/" is mounted on "/" but it is not a shared mount`
		for _, n := range ps.Nodes {
			if n.Name == "node-a" && n.Phase == hppv1.StoragePoolMounting && n.Reason == want {
				return nil
			}
		}
		return fmt.Errorf("nodes %+v", ps.Nodes)
	})
	for _, n := range nodes {
		h.playMounterReady("block", n)
	}
	waitAvailable(t, h, "hpp")
	ps, err := h.poolStatus("hpp", "block")
	if err != nil {
		t.Fatal(err)
	}
	if ps.Phase != hppv1.StoragePoolReady || ps.CurrentReady != len(nodes) || len(ps.ClaimStatuses) != len(nodes) {
		t.Errorf("pool status %+v", ps)
	}
	for _, n := range ps.Nodes {
		if !n.Ready || !n.MounterReady || n.ClaimPhase != corev1.ClaimBound || n.Phase != hppv1.StoragePoolReady {
			t.Errorf("node status %+v", n)
		}
	}
	assertSteadyStateWritesNothing(t, h, "hpp")

	// node-b leaves the placement: its mounter goes, a cleanup Job
	// unmounts, its claim is kept.
	h.setNodeLabels("node-b", map[string]string{"hpp": "no"})
	h.waitGone("mounter on node-b", deployment(ns, "hpp-pool-block-node-b"))
	job := &batchv1.Job{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: "cleanup-pool-block-node-b"}, job); err != nil {
		t.Fatal(err)
	}
	jp := job.Spec.Template.Spec
	if jc := jp.Containers[0]; jc.Args[0] != "unmount" || !slices.Contains(jc.Args, "--mountPath=/var/hpp-block/csi") {
		t.Errorf("cleanup args %v", jc.Args)
	}
	if jp.NodeSelector != nil || jp.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-b" ||
		!slices.ContainsFunc(jp.Tolerations, func(t corev1.Toleration) bool {
			return t.Key == "" && t.Operator == corev1.TolerationOpExists && t.Effect == corev1.TaintEffectNoSchedule
		}) || *job.Spec.ActiveDeadlineSeconds != render.CleanupDeadlineSeconds || !metav1.IsControlledBy(job, mustGetCR(t, h, "hpp")) {
		t.Errorf("cleanup Job placement: nodeSelector %v affinity %+v tolerations %v", jp.NodeSelector, jp.Affinity, jp.Tolerations)
	}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: "hpp-pool-block-node-b"}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("pool claim of a node that left: %v (must be kept)", err)
	}
	h.waitEvent("PoolRetired", `storage pool "block" leaves node node-b: mounter hpp-pool-block-node-b deleted, cleanup Job cleanup-pool-block-node-b unmounts /var/hpp-block/csi; its claim is kept`)
	h.finishJob("cleanup-pool-block-node-b", true)
	h.waitGone("succeeded cleanup Job", job)

	// A deleted node: its mounter goes, no Job (nothing is mounted there).
	if err := h.admin.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: long}}); err != nil {
		t.Fatal(err)
	}
	h.waitGone("mounter on the deleted node", deployment(ns, longName))
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CleanupJobName("block", long)}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("cleanup Job for a deleted node: %v", err)
	}

	// A node joins: the pool follows.
	addNode(t, h, "node-c", sel)
	eventually(t, "mounter and claim on node-c", func() error {
		if _, err := h.mounter("block", "node-c"); err != nil {
			return err
		}
		return h.get(client.ObjectKey{Namespace: ns, Name: "hpp-pool-block-node-c"}, &corev1.PersistentVolumeClaim{})
	})
}

// A pool removed from the CR: mounters go, cleanup Jobs run, claims stay.
// Deleting the CR waits for the cleanup Jobs, then reports a failed one.
func TestTemplatePoolRemovalAndCRDeletion(t *testing.T) {
	h := start(t, "hpp-pools-removal")
	ns := h.cfg.Namespace
	addNode(t, h, "rm-1", nil)
	addNode(t, h, "rm-2", nil)
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "fs", Path: "/var/fs", PVCTemplate: template(corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)},
		hppv1.StoragePool{Name: "blk", Path: "/var/blk", PVCTemplate: template(corev1.PersistentVolumeBlock, corev1.ReadWriteOnce)})
	h.create(cr)
	for _, p := range []string{"fs", "blk"} {
		for _, n := range []string{"rm-1", "rm-2"} {
			eventually(t, "mounter "+p+" on "+n, func() error { _, err := h.mounter(p, n); return err })
		}
	}
	d, _ := h.mounter("fs", "rm-1")
	if c := d.Spec.Template.Spec.Containers[0]; !slices.Contains(c.Args, "--storagePoolPath=/source") || len(c.VolumeDevices) != 0 ||
		!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "data" && m.MountPath == "/source" }) {
		t.Errorf("filesystem pool mounter: args %v mounts %v devices %v", c.Args, c.VolumeMounts, c.VolumeDevices)
	}

	h.updateCR("hpp", func(cur *hppv1.HostPathProvisioner) { cur.Spec.StoragePools = cur.Spec.StoragePools[:1] })
	for _, n := range []string{"rm-1", "rm-2"} {
		h.waitGone("blk mounter on "+n, deployment(ns, render.MounterName("blk", n)))
		job := &batchv1.Job{}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: "cleanup-pool-blk-" + n}, job); err != nil {
			t.Fatalf("cleanup Job of the removed pool on %s: %v", n, err)
		}
		if !slices.Contains(job.Spec.Template.Spec.Containers[0].Args, "--mountPath=/var/blk/csi") {
			t.Errorf("cleanup Job args %v: the removed pool's path comes from the mounter's annotation", job.Spec.Template.Spec.Containers[0].Args)
		}
		if err := h.get(client.ObjectKey{Namespace: ns, Name: "hpp-pool-blk-" + n}, &corev1.PersistentVolumeClaim{}); err != nil {
			t.Errorf("claim of the removed pool: %v (kept by policy)", err)
		}
		h.finishJob("cleanup-pool-blk-"+n, true)
	}
	if _, err := h.mounter("fs", "rm-1"); err != nil {
		t.Errorf("the remaining pool's mounter: %v", err)
	}

	// Deletion waits for the cleanup Jobs.
	if err := h.admin.Delete(h.ctx, mustGetCR(t, h, "hpp")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CR held while cleanup Jobs run", func() error {
		c, err := h.cond("hpp", hppv1.ConditionProgressing)
		if err != nil {
			return err
		}
		if c.Reason != "CleaningUp" || !strings.Contains(c.Message, "cleanup-pool-fs-rm-1") {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})
	h.finishJob("cleanup-pool-fs-rm-1", true)
	h.finishJob("cleanup-pool-fs-rm-2", false)
	h.waitGone("CR", &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "hpp"}})
	h.waitEvent("PoolCleanupIncomplete", `cleanup-pool-fs-rm-2 (pool "fs" on node rm-2, /var/fs/csi)`)
	for _, n := range []string{"rm-1", "rm-2"} {
		if err := h.get(client.ObjectKey{Namespace: ns, Name: "hpp-pool-fs-" + n}, &corev1.PersistentVolumeClaim{}); err != nil {
			t.Errorf("pool claim after the CR's deletion: %v (kept: it holds data)", err)
		}
	}
}

// A ReadWriteMany pool: one shared claim, a mounter per node, upstream's
// overlay StorageClass; two pools wanting one class name are reported.
func TestSharedPoolAndOverlayClassConflict(t *testing.T) {
	h := start(t, "hpp-pools-shared")
	ns := h.cfg.Namespace
	addNode(t, h, "sh-1", nil)
	addNode(t, h, "sh-2", nil)
	t.Cleanup(func() {
		for _, n := range []string{"hpp-overlay", "hpp-overlay-2"} {
			_ = h.admin.Delete(h.ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "nfs", Path: "/var/nfs", PVCTemplate: template(corev1.PersistentVolumeFilesystem, corev1.ReadWriteMany)})
	h.create(cr)
	for _, n := range []string{"sh-1", "sh-2"} {
		eventually(t, "mounter on "+n, func() error {
			d, err := h.mounter("nfs", n)
			if err != nil {
				return err
			}
			if c := d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName; c != "hpp-pool-nfs-shared" {
				return fmt.Errorf("mounter on %s uses claim %s, want the shared one", n, c)
			}
			return nil
		})
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := h.admin.List(h.ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "hpp-pool-nfs-shared" {
		t.Errorf("claims %v: want only hpp-pool-nfs-shared", list.Items)
	}
	sc := &storagev1.StorageClass{}
	eventually(t, "overlay StorageClass", func() error { return h.get(client.ObjectKey{Name: "hpp-overlay"}, sc) })
	if sc.Provisioner != contract.DriverName || sc.Parameters[contract.ParamStoragePool] != "nfs" || sc.Parameters[contract.ParamOverlayCSI] != "true" ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("overlay StorageClass %+v", sc)
	}
	if want := `{"name":"nfs","path":"/nfs-data-dir/csi","shared":true,"mounted":true}`; !strings.Contains(pvDir(h.csiDaemonSet()), want) {
		t.Errorf("PV_DIR %s lacks %s", pvDir(h.csiDaemonSet()), want)
	}

	second := hppv1.StoragePool{Name: "nfs2", Path: "/var/nfs2", PVCTemplate: template(corev1.PersistentVolumeFilesystem, corev1.ReadWriteMany)}
	h.updateCR("hpp", func(cur *hppv1.HostPathProvisioner) { cur.Spec.StoragePools = append(cur.Spec.StoragePools, second) })
	eventually(t, "Degraded OverlayClassConflict", func() error {
		c, err := h.cond("hpp", hppv1.ConditionDegraded)
		if err != nil {
			return err
		}
		if c.Status != corev1.ConditionTrue || c.Reason != "OverlayClassConflict" ||
			c.Message != `storage pools "nfs" and "nfs2" both use overlay StorageClass "hpp-overlay": set a distinct spec.storagePools[].overlayClassName for "nfs2"` {
			return fmt.Errorf("Degraded %+v", c)
		}
		return nil
	})
	h.waitEvent("OverlayClassConflict", `"nfs2"`)
	h.updateCR("hpp", func(cur *hppv1.HostPathProvisioner) { cur.Spec.StoragePools[1].OverlayClassName = "hpp-overlay-2" })
	eventually(t, "conflict resolved", func() error {
		c, err := h.cond("hpp", hppv1.ConditionDegraded)
		if err != nil {
			return err
		}
		if c.Status != corev1.ConditionFalse {
			return fmt.Errorf("Degraded %+v", c)
		}
		return h.get(client.ObjectKey{Name: "hpp-overlay-2"}, &storagev1.StorageClass{})
	})
}

func mustGetCR(t *testing.T, h *harness, name string) *hppv1.HostPathProvisioner {
	t.Helper()
	cr := &hppv1.HostPathProvisioner{}
	if err := h.get(client.ObjectKey{Name: name}, cr); err != nil {
		t.Fatal(err)
	}
	return cr
}

// A node leaving the placement while it holds volumes of the pool keeps
// its mounter (unmounting would strand them) and says so in the status;
// once the volumes are gone, the mounter is retired.
func TestNodeLeavingWithVolumesKeepsItsMounter(t *testing.T) {
	h := start(t, "hpp-pools-keep")
	ns := h.cfg.Namespace
	sel := map[string]string{"hpp": "yes"}
	addNode(t, h, "keep-1", sel)
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "blk", Path: "/var/blk", PVCTemplate: template(corev1.PersistentVolumeBlock, corev1.ReadWriteOnce)})
	cr.Spec.Workload.NodeSelector = sel
	h.create(cr)
	eventually(t, "mounter", func() error { _, err := h.mounter("blk", "keep-1"); return err })
	pv := testenv.DriverPV("pvc-keep", "blk", "keep-1")
	h.create(pv)
	h.setNodeLabels("keep-1", nil)
	eventually(t, "node reported as kept", func() error {
		ps, err := h.poolStatus("hpp", "blk")
		if err != nil {
			return err
		}
		for _, ns := range ps.Nodes {
			if ns.Name == "keep-1" && strings.Contains(ns.Reason, "holds 1 volume(s) of pool \"blk\"") {
				return nil
			}
		}
		return fmt.Errorf("nodes %+v", ps.Nodes)
	})
	if _, err := h.mounter("blk", "keep-1"); err != nil {
		t.Errorf("mounter of a node holding volumes: %v", err)
	}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: "cleanup-pool-blk-keep-1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("cleanup Job while volumes remain: %v", err)
	}

	// The volume goes (envtest has no controller to drop pv-protection).
	if err := h.admin.Delete(h.ctx, pv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PV gone", func() error {
		cur := &corev1.PersistentVolume{}
		if err := h.get(client.ObjectKeyFromObject(pv), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		cur.Finalizers = nil
		if err := h.admin.Update(h.ctx, cur); err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
	// The PV's deletion itself triggers the reconcile.
	h.waitGone("mounter of the node without volumes", deployment(ns, render.MounterName("blk", "keep-1")))
	h.finishJob("cleanup-pool-blk-keep-1", true)
}

// Takeover: the upstream operator's mounter Deployment of the same name
// is adopted in place: same uid, its selector kept (immutable; deleting it
// would restart the mounter), hpp's image and arguments rolled in, no
// cleanup Job (the pool stays mounted).
func TestUpstreamMounterIsAdoptedInPlace(t *testing.T) {
	h := start(t, "hpp-pools-takeover")
	ns := h.cfg.Namespace
	addNode(t, h, "tk-1", nil)
	upstreamLabels := map[string]string{"hpp-pool": "blk", "app.kubernetes.io/version": "v0.20.0"}
	upstream := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hpp-pool-blk-tk-1",
			Labels: map[string]string{"k8s-app": "hostpath-provisioner", contract.PoolLabel: "blk-hpp"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: upstreamLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: upstreamLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mounter", Image: "quay.io/kubevirt/hostpath-provisioner-operator",
					Command: []string{"/usr/bin/mounter", "--storagePoolPath", "/dev/data", "--mountPath", "/var/blk/csi", "--hostPath", "/host"}}}}},
		},
	}
	h.create(upstream)
	cr := poolsCR("hpp", hppv1.StoragePool{Name: "blk", Path: "/var/blk", PVCTemplate: template(corev1.PersistentVolumeBlock, corev1.ReadWriteOnce)})
	h.create(cr)
	eventually(t, "upstream's mounter runs hpp's image, selector and uid kept", func() error {
		d, err := h.mounter("blk", "tk-1")
		if err != nil {
			return err
		}
		if d.UID != upstream.UID {
			return fmt.Errorf("uid %s, upstream's %s: replaced", d.UID, upstream.UID)
		}
		if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, upstreamLabels) {
			return fmt.Errorf("selector %v, want upstream's %v", d.Spec.Selector.MatchLabels, upstreamLabels)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != h.cfg.Images.Mounter {
			return fmt.Errorf("image %s", img)
		}
		if got := d.Spec.Template.Labels; got["app.kubernetes.io/version"] != "v0.20.0" || got[render.MounterSelector] != d.Name {
			return fmt.Errorf("pod labels %v: the selector's and hpp's", got)
		}
		return nil
	})
	h.waitEvent("ImmutableFieldsKept", "Deployment hpp-pool-blk-tk-1 keeps spec.selector")
	jobs := &batchv1.JobList{}
	if err := h.admin.List(h.ctx, jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("an adopted mounter got a cleanup Job (the pool would be unmounted): %s", jobs.Items[0].Name)
	}
}
